//! What became of one request, and who caused it: the [`Fate`] a typed
//! refusal (`refusal.rs`) or a relay ends in, from which the log line takes
//! its `decision` ([`Class`]), `outcome` and `cause`, and the metrics their
//! `decision` and `outcome` labels: one value set each, shared by both.
//! Pure: no I/O.

label_set! {
    /// The end of one request, named as the `outcome` label of
    /// `robots_proxy_request_outcomes_total` and the log line's `outcome`:
    /// the split of each [`Class`] an operator triages by.
    pub enum Fate {
        /// Admitted and the upstream's answer relayed (whole or cut short).
        Relayed => "allowed",
        /// The client may not use the proxy, or as no bot (access rules).
        Denied => "access",
        /// The client's request is malformed.
        Malformed => "malformed",
        /// The proxy's own rules refuse it (address, port, another host).
        ProxyRule => "proxy-rule",
        /// robots.txt disallows it.
        Disallowed => "disallowed",
        /// `limits.deny_hosts` lists the host: never contacted.
        DenyHosts => "deny-hosts",
        /// The upstream's answer refused a use the bot declares: not relayed.
        Preference => "response-preference",
        /// robots.txt could not be fetched and there is no good copy.
        RobotsUnreachable => "robots-unreachable",
        /// The upstream could not be reached, or answered badly before relaying.
        UpstreamFailed => "upstream",
        /// The host's turn would come later than `max_wait`.
        SlowDown => "slow-down",
        /// The client left while its request waited for its turn.
        ClientLeft => "client-left",
    }
}

label_set! {
    /// Who caused a fate: what an operator looks at first.
    pub enum Cause {
        Client => "client",
        Access => "access",
        RobotsTxt => "robots.txt",
        Upstream => "upstream",
        ProxyRule => "proxy",
        /// The operator's list of hosts never to contact.
        Operator => "operator",
        /// A preference the site stated on its answer.
        Site => "site",
        Politeness => "politeness",
    }
}

label_set! {
    /// The `decision` label of `robots_proxy_requests_total` and the log
    /// line's `decision`: four values (docs/architecture.md, "Metrics"), so a
    /// dashboard's legend stays small.
    pub enum Class {
        Allowed => "allowed",
        Disallowed => "disallowed",
        Slowed => "slowed",
        Error => "error",
    }
}

label_set! {
    /// Work a crawler lost: a page it asked for and did not get, and why,
    /// told apart as an operator needs to act on it (the status page's
    /// `lost` column per site, the log line's `lost`).
    pub enum Lost {
        /// Its turn was further than its bound (`max_wait`, the bot's own):
        /// told "slow down" with the wait left.
        Wait => "wait",
        /// One of its bot's limits held it past its bound.
        Limit => "limit",
        /// Its client left while it waited (its own timeout).
        ClientLeft => "client-left",
        /// It left its place in line and never came back for it within its
        /// bound: the crawler gave the page up.
        GivenUp => "given-up",
    }
}

impl Fate {
    pub fn cause(self) -> Cause {
        match self {
            Fate::Relayed | Fate::UpstreamFailed => Cause::Upstream,
            Fate::Malformed | Fate::ClientLeft => Cause::Client,
            Fate::ProxyRule => Cause::ProxyRule,
            Fate::Denied => Cause::Access,
            Fate::Disallowed | Fate::RobotsUnreachable => Cause::RobotsTxt,
            Fate::SlowDown => Cause::Politeness,
            Fate::DenyHosts => Cause::Operator,
            Fate::Preference => Cause::Site,
        }
    }

    /// How the request is counted. The proxy's own refusals, malformed
    /// requests and clients that left are errors: requests that got no answer
    /// from the upstream and were not a robots.txt or politeness decision.
    pub fn class(self) -> Class {
        match self {
            Fate::Relayed => Class::Allowed,
            Fate::Disallowed | Fate::DenyHosts | Fate::Preference => Class::Disallowed,
            Fate::SlowDown => Class::Slowed,
            Fate::Malformed
            | Fate::Denied
            | Fate::ProxyRule
            | Fate::RobotsUnreachable
            | Fate::UpstreamFailed
            | Fate::ClientLeft => Class::Error,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fate_has_one_class_and_cause_and_indices_follow_all() {
        for (i, fate) in Fate::ALL.iter().enumerate() {
            assert_eq!(fate.index(), i);
            assert!(Class::ALL.contains(&fate.class()));
            assert!(Cause::ALL.contains(&fate.cause()));
        }
        for (i, class) in Class::ALL.iter().enumerate() {
            assert_eq!(class.index(), i);
        }
        assert_eq!(Fate::ClientLeft.class(), Class::Error);
        let outcomes: std::collections::HashSet<_> = Fate::ALL.iter().map(|f| f.as_str()).collect();
        assert_eq!(
            outcomes.len(),
            Fate::ALL.len(),
            "one outcome label per fate"
        );
        assert_eq!(Fate::ProxyRule.as_str(), "proxy-rule");
    }
}
