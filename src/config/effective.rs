//! The effective configuration written out as a TOML file, defaults included:
//! what `run --check-config` prints, and what reads back to the same `Config`.

use super::{format_duration, Config, LogFormat, OnUnreachable};
use crate::listener::Listener;

/// Items written as they read back.
fn strings<T: ToString>(items: &[T]) -> Vec<String> {
    items.iter().map(|i| i.to_string()).collect()
}

impl Config {
    /// What `run --check-config` prints: [`Config::to_toml`] with SOCKS5
    /// passwords replaced by a placeholder, so the output can be pasted into an
    /// issue or a log safely.
    pub fn to_toml_redacted(&self) -> String {
        self.toml(true)
    }

    /// The effective configuration as a TOML file that reads back to this `Config`.
    pub fn to_toml(&self) -> String {
        self.toml(false)
    }

    fn toml(&self, redact: bool) -> String {
        let d = format_duration;
        let quote = |s: &str| format!("{s:?}");
        let list = |items: &[String]| {
            format!(
                "[{}]",
                items
                    .iter()
                    .map(|s| quote(s))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        let p = &self.politeness;
        let mut out = String::new();
        out.push_str(&format!(
            "state_dir = {}\n\n",
            quote(&self.state_dir.display().to_string())
        ));
        out.push_str("[listen]\n");
        for &listener in Listener::ALL {
            let name = listener.spec().key.trim_start_matches("listen.");
            match self.listen.get(listener) {
                Some(addr) => out.push_str(&format!("{name} = {}\n", quote(&addr.to_string()))),
                None => out.push_str(&format!("# {name}: off\n")),
            }
        }
        out.push('\n');
        out.push_str(&format!(
            "[socks5]\nhttps_ports = {}\nusers = [\n",
            list(&self.socks5_https_ports.items())
        ));
        {
            for (name, password) in &self.socks5_users {
                out.push_str(&format!(
                    "  {{ name = {}, password = {} }},\n",
                    quote(name),
                    match redact {
                        true => quote("(redacted)"),
                        false => quote(password),
                    }
                ));
            }
            out.push_str("]\n\n");
        }
        out.push_str("[gopher]\n");
        match &self.gopher_public_host {
            Some(h) => out.push_str(&format!("public_host = {}\n", quote(h))),
            None => out.push_str("# public_host: the Gopher listener's address\n"),
        }
        match self.gopher_public_port {
            Some(port) => out.push_str(&format!("public_port = {port}\n")),
            None => out.push_str("# public_port: the Gopher listener's port\n"),
        }
        out.push_str(&format!(
            "literal_selectors = {}\n\n",
            self.selector_reading == crate::spelling::SelectorReading::Literal
        ));
        out.push_str(&format!(
            "[access]\nallow_from = {}\nrequire_client_cert = {}\n\n",
            list(&strings(&self.access.allow_from)),
            self.access.require_client_cert
        ));
        let default = self.bots.default_bot();
        for (id, bot) in self.bots.all().iter().enumerate() {
            let agent = quote(bot.profile.token());
            let virtual_agents = list(bot.profile.virtual_agents());
            if Some(id) == default {
                out.push_str(&format!(
                    "# The default bot: connections that no [[bots]] entry picks.\n[bot]\nname = {}\nagent = {agent}\nvirtual_agents = {virtual_agents}\n\n",
                    quote(&bot.name)
                ));
                continue;
            }
            out.push_str(&format!(
                "[[bots]]\nname = {}\nagent = {agent}\nvirtual_agents = {virtual_agents}\nsocks5_users = {}\nclient_certs = {}\nclients = {}\n\n",
                quote(&bot.name),
                list(&bot.socks5_users),
                list(&strings(&bot.client_certs)),
                list(&strings(&bot.clients)),
            ));
        }
        if default.is_none() {
            out.push_str(
                "# No [bot] section: a connection that no [[bots]] entry picks is refused.\n\n",
            );
        }
        let r = &self.robots;
        out.push_str(&format!(
            "[robots]\nttl = {}\ncache_bytes = {}\nmax_stale = {}\nunreachable_retry = {}\non_unreachable = {}\nfetch_timeout = {}\nname_bot_in_request = {}\n\n",
            quote(&d(r.ttl)),
            r.cache_bytes,
            quote(&d(r.max_stale)),
            quote(&d(r.unreachable_retry)),
            quote(match r.on_unreachable {
                OnUnreachable::Disallow => "disallow",
                OnUnreachable::Allow => "allow",
            }),
            quote(&d(r.fetch_timeout)),
            r.name_bot_in_request
        ));
        out.push_str(&format!(
            "[politeness]\nkey = {}\ndefault_delay = {}\nmin_delay = {}\n{}per_host_concurrency = {}\nmax_wait = {}\n\n",
            quote(p.key.as_str()),
            quote(&d(p.default_delay)),
            quote(&d(p.min_delay)),
            match p.max_delay {
                Some(m) => format!("max_delay = {}\n", quote(&d(m))),
                None => "# max_delay: unset, a Crawl-delay stands however long\n".into(),
            },
            p.per_host_concurrency,
            quote(&d(p.max_wait))
        ));
        out.push_str(&format!(
            "[log]\nformat = {}\nlevel = {}\n\n",
            quote(match self.log_format {
                LogFormat::Human => "human",
                LogFormat::Json => "json",
            }),
            quote(&self.log_level)
        ));
        match self.metrics_per_host {
            Some(limit) => out.push_str(&format!(
                "[metrics]\nper_host = true\nper_host_limit = {limit}\n\n"
            )),
            None => out.push_str("[metrics]\nper_host = false\n\n"),
        }
        let l = &self.limits;
        out.push_str(&format!(
            "[limits]\nmax_connections = {}\nmax_connections_per_client = {}\nrequest_timeout = {}\nconnect_timeout = {}\nidle_timeout = {}\nshutdown_grace = {}\nallow_private_upstreams = {}\nupstream_ports = {}\n{}\n",
            l.max_connections,
            l.max_connections_per_client,
            quote(&d(l.request_timeout)),
            quote(&d(l.connect_timeout)),
            quote(&d(l.idle_timeout)),
            quote(&d(l.shutdown_grace)),
            l.allow_private_upstreams,
            list(&l.upstream_ports.items()),
            match l.upstream_mark {
                Some(mark) => format!("upstream_mark = {mark}\n"),
                None => "# upstream_mark: unset, upstream sockets carry no mark\n".to_string(),
            }
        ));
        match &self.store {
            Some(st) => out.push_str(&format!(
                "[store]\nurl = {}\nprefix = {}\non_unavailable = {}\ntimeout = {}\nlease = {}\n\n",
                quote(&match redact {
                    true => crate::store::redacted(&st.url),
                    false => st.url.clone(),
                }),
                quote(&st.prefix),
                quote(st.on_unavailable.as_str()),
                quote(&d(st.timeout)),
                quote(&d(st.lease)),
            )),
            None => out.push_str(
                "[store]\n# url: unset, this proxy keeps its gate, cache and pins to itself\n\n",
            ),
        }
        out.push_str("[admin]\n");
        match (&self.admin.token, redact) {
            (Some(_), true) => out.push_str("token = \"<redacted>\"\n"),
            (Some(t), false) => out.push_str(&format!("token = {}\n", quote(t))),
            (None, _) => out.push_str(
                "# token: unset, only loopback clients may use the admin listener's actions\n",
            ),
        }
        match &self.admin.allow_from {
            Some(ranges) => out.push_str(&format!("allow_from = {}\n", list(&strings(ranges)))),
            None => out.push_str(match self.admin.token {
                Some(_) => "# allow_from: unset, any client with the token (loopback without)\n",
                None => "# allow_from: unset, loopback clients only\n",
            }),
        }
        out.push_str(&format!("hosts = {}\n\n", list(&self.admin.hosts)));
        out.push_str("[tls]\n");
        if let Some((cert, key)) = &self.tls.cert_and_key {
            out.push_str(&format!(
                "cert = {}\nkey = {}\n",
                quote(&cert.display().to_string()),
                quote(&key.display().to_string())
            ));
        }
        out.push_str(&format!("hostnames = {}\n", list(&self.tls.hostnames)));
        out
    }
}
