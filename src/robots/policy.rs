//! Which groups apply to a bot, and decisions with their reasons.
//!
//! docs/architecture.md, "robots.txt semantics": the groups naming the bot's own product
//! token; otherwise the groups of each of its virtual agents (`User-agent:
//! indexer` or `Virtual-agent: indexer`), all of which must allow a target, the
//! largest crawl-delay of theirs applying; otherwise `*`; otherwise everything is
//! allowed. Groups naming the same agent are merged (RFC 9309 §2.2.1).

use std::borrow::Cow;
use std::fmt;
use std::time::Duration;

use super::encoding::{normalize, Mode, StackBuf};
use super::matcher::{scan_normal_target, RuleSet, NO_SIGNATURE};
use super::parse::{is_token_byte, AgentKind, Delay, Group, RobotsTxt, Rule, RuleKind, VisitTime};
use super::usage::{Preference, Stated, Use, Vocabulary};

/// Who a request acts for: the bot's product token and its virtual agents.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BotProfile {
    token: String,
    virtual_agents: Vec<String>,
    /// What it does with what it fetches (`content_usage`): robots.txt's
    /// preferences about these uses decide too.
    uses: Vec<Use>,
}

impl BotProfile {
    /// A bot named by its product token (`examplebot`, or `ExampleBot/2.1`, whose
    /// version is dropped). Matching is case-insensitive.
    pub fn new(token: &str) -> BotProfile {
        let token = token.split('/').next().unwrap_or_default();
        BotProfile {
            token: token.to_ascii_lowercase(),
            virtual_agents: Vec::new(),
            uses: Vec::new(),
        }
    }

    /// Adds a virtual agent (`archiver`, `indexer`, `researcher`, `webproxy`, or any word).
    pub fn with_virtual_agent(mut self, name: &str) -> BotProfile {
        let name = name.to_ascii_lowercase();
        if !name.is_empty() && !self.virtual_agents.contains(&name) {
            self.virtual_agents.push(name);
        }
        self
    }

    /// Declares a use of what it fetches (`train-ai`, `search`, …): a target
    /// whose robots.txt preference refuses it is disallowed.
    pub fn with_use(mut self, use_: Use) -> BotProfile {
        if !self.uses.contains(&use_) {
            self.uses.push(use_);
        }
        self
    }

    pub fn uses(&self) -> &[Use] {
        &self.uses
    }

    pub fn token(&self) -> &str {
        &self.token
    }

    pub fn virtual_agents(&self) -> &[String] {
        &self.virtual_agents
    }

    /// The bot as a web server's robots.txt names it: its product token
    /// (and its uses), without the Gemini virtual agents, which are the
    /// small web's.
    pub fn on_the_web(&self) -> BotProfile {
        BotProfile {
            virtual_agents: Vec::new(),
            ..self.clone()
        }
    }
}

/// Checks that `token` is a product token as RFC 9309 §2.2.1 describes it
/// (letters, `_`, `-`; we also accept digits), optionally followed by `/version`.
pub fn valid_product_token(token: &str) -> bool {
    let name = token.split('/').next().unwrap_or_default();
    !name.is_empty() && name.bytes().all(is_token_byte) && !token.contains(char::is_whitespace)
}

/// A virtual agent's name: one word of letters, digits, `_` and `-`.
pub fn valid_virtual_agent(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Which rank of the group order (docs/architecture.md) the applying groups came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selected {
    /// Groups naming the bot's own product token.
    OwnToken,
    /// Groups naming one or more of the bot's virtual agents.
    VirtualAgents,
    /// The `*` groups.
    Star,
    /// No group applies: everything is allowed.
    Nothing,
}

/// The merged groups for one agent name, compiled.
#[derive(Clone, Debug)]
struct AgentRules {
    /// The name the groups were selected by: the bot's token, a virtual agent, or `*`.
    name: String,
    /// The agent lines naming it.
    lines: Vec<u32>,
    rules: RuleSet,
    /// The largest crawl-delay of the agent lines naming it.
    crawl_delay: Option<Delay>,
    /// Its `Content-Usage` / `Content-Signal` lines, when the bot declares a use.
    usage: Option<UsageSet>,
    /// Its `Visit-time` windows: visits only in one of them.
    visits: Vec<VisitTime>,
}

/// A group's preference lines, compiled: matched as rules are (the longest
/// path wins), one entry per distinct path.
#[derive(Clone, Debug)]
struct UsageSet {
    /// Each rule's `line` is its entry's index.
    paths: RuleSet,
    entries: Vec<UsageEntry>,
}

/// The lines of one path: what they state together (the most restrictive
/// of each), and each line, to name the one that decided.
#[derive(Clone, Debug)]
struct UsageEntry {
    stated: Stated,
    lines: Vec<(u32, Vocabulary, Stated)>,
}

/// The rules of one robots.txt for one bot, ready to decide many targets.
#[derive(Clone, Debug)]
pub struct Policy {
    selected: Selected,
    sets: Vec<AgentRules>,
    crawl_delay: Option<Delay>,
    /// The bot's declared uses (its profile's).
    uses: Vec<Use>,
}

/// Why a target was allowed or disallowed; explained by [`Policy::explain`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reason {
    /// RFC 9309 §2.2.2: `/robots.txt` is always allowed.
    RobotsTxtItself,
    NoGroup,
    NoMatchingRule {
        set: u16,
    },
    Rule {
        set: u16,
        rule: u32,
    },
    /// Its rules allow it, and a preference refuses one of the bot's uses.
    Usage {
        set: u16,
        entry: u32,
        /// The category that stated it (perhaps the declared use's parent).
        category: Use,
    },
}

/// An allow/disallow verdict. `Copy`, and cheap: the explanation is built on demand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Decision {
    allowed: bool,
    reason: Reason,
}

impl Decision {
    pub fn allowed(&self) -> bool {
        self.allowed
    }
}

/// The group that decided, for explanations.
#[derive(Clone, Copy, Debug)]
pub struct GroupInfo<'a> {
    pub name: &'a str,
    pub selected: Selected,
    /// The agent lines (1-based) naming it.
    pub lines: &'a [u32],
}

/// The rule that decided, for explanations.
#[derive(Clone, Copy, Debug)]
pub struct RuleInfo<'a> {
    pub kind: RuleKind,
    /// The pattern in normal form (percent-encoding normalised).
    pub pattern: &'a str,
    pub line: u32,
}

/// A decision with the group and rule behind it; `Display` gives one line.
#[derive(Clone, Copy, Debug)]
pub struct Explanation<'a> {
    pub allowed: bool,
    pub group: Option<GroupInfo<'a>>,
    pub rule: Option<RuleInfo<'a>>,
    /// The preference that refused one of the bot's declared uses.
    pub usage: Option<Preference>,
    /// True for `/robots.txt` itself.
    pub robots_txt_itself: bool,
}

impl fmt::Display for GroupInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "group {}", self.name)?;
        if self.selected == Selected::VirtualAgents {
            write!(f, " [virtual agent]")?;
        }
        let plural = if self.lines.len() > 1 { "s" } else { "" };
        write!(f, " (line{plural} ")?;
        for (i, line) in self.lines.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{line}")?;
        }
        write!(f, ")")
    }
}

impl fmt::Display for RuleInfo<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rule {}: {} (line {})",
            self.kind.as_str(),
            self.pattern,
            self.line
        )
    }
}

/// The group, a tab, and the rule (or preference) that decided; with `{:#}`,
/// `; ` instead of the tab (one line of a log or a JSON field).
impl fmt::Display for Explanation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.robots_txt_itself {
            return write!(f, "robots.txt itself is always allowed");
        }
        let sep = if f.alternate() { "; " } else { "\t" };
        match (self.group, self.rule, self.usage) {
            (None, _, _) => write!(f, "no group applies to this bot"),
            (Some(g), _, Some(p)) => write!(f, "{g}{sep}{p}"),
            (Some(g), None, None) => write!(f, "{g}{sep}no rule matches"),
            (Some(g), Some(r), None) => write!(f, "{g}{sep}{r}"),
        }
    }
}

impl RobotsTxt {
    /// Selects and compiles the groups that apply to `bot`.
    pub fn policy(&self, bot: &BotProfile) -> Policy {
        let mut policy = self.select(bot);
        policy.uses = bot.uses.clone();
        policy
    }

    fn select(&self, bot: &BotProfile) -> Policy {
        let own = (!bot.token.is_empty())
            .then(|| self.agent_rules(&bot.token, |kind| kind == AgentKind::User, &bot.uses))
            .flatten();
        if let Some(own) = own {
            return Policy::new(Selected::OwnToken, vec![own]);
        }
        let virtuals: Vec<AgentRules> = bot
            .virtual_agents
            .iter()
            .filter_map(|v| self.agent_rules(v, |_| true, &bot.uses))
            .collect();
        if !virtuals.is_empty() {
            return Policy::new(Selected::VirtualAgents, virtuals);
        }
        match self.agent_rules("*", |_| true, &bot.uses) {
            Some(star) => Policy::new(Selected::Star, vec![star]),
            None => Policy::allow_all(),
        }
    }

    /// The merged groups that name `name` in a namespace `kind_ok` accepts, if any,
    /// with their largest crawl-delay.
    fn agent_rules(
        &self,
        name: &str,
        kind_ok: impl Fn(AgentKind) -> bool,
        uses: &[Use],
    ) -> Option<AgentRules> {
        let names = |group: &Group| {
            self.agents[group.agents.start as usize..group.agents.end as usize]
                .iter()
                .filter(|agent| kind_ok(agent.kind) && self.bytes(agent.name) == name.as_bytes())
        };
        let mut lines = Vec::new();
        let mut crawl_delay: Option<Delay> = None;
        // The rules of the named groups, in file order: borrowed when one
        // group names the agent (the usual case), merged into a copy otherwise.
        let mut rules: Cow<[Rule]> = Cow::Borrowed(&[]);
        let mut usages = Vec::new();
        let mut visits = Vec::new();
        for group in &self.groups {
            let before = lines.len();
            for agent in names(group) {
                lines.push(agent.line);
                if let Some(d) = agent.crawl_delay {
                    crawl_delay = Some(d.larger(crawl_delay));
                }
                let windows = &self.visits[agent.visits.start as usize..agent.visits.end as usize];
                for w in windows {
                    if !visits.contains(w) {
                        visits.push(*w);
                    }
                }
            }
            if lines.len() > before {
                let group_rules = &self.rules[group.rules.start as usize..group.rules.end as usize];
                if before == 0 {
                    rules = Cow::Borrowed(group_rules);
                } else {
                    rules.to_mut().extend_from_slice(group_rules);
                }
                if !uses.is_empty() {
                    usages.extend(group.usages.clone());
                }
            }
        }
        if lines.is_empty() {
            return None;
        }
        Some(AgentRules {
            name: name.to_string(),
            lines,
            rules: RuleSet::build(&self.strings, &rules),
            crawl_delay,
            usage: (!usages.is_empty()).then(|| self.usage_set(&usages)),
            visits,
        })
    }

    /// The preference lines `indices` (of [`RobotsTxt::usages`]), one entry
    /// per distinct path.
    fn usage_set(&self, indices: &[u32]) -> UsageSet {
        let mut entries: Vec<UsageEntry> = Vec::new();
        let mut rules: Vec<Rule> = Vec::new();
        let mut by_path: std::collections::HashMap<&[u8], usize> = Default::default();
        for &i in indices {
            let u = &self.usages[i as usize];
            let at = *by_path.entry(self.bytes(u.pattern)).or_insert_with(|| {
                entries.push(UsageEntry {
                    stated: Stated::default(),
                    lines: Vec::new(),
                });
                rules.push(Rule {
                    kind: RuleKind::Allow,
                    pattern: u.pattern,
                    wild: u.wild,
                    line: (entries.len() - 1) as u32,
                });
                entries.len() - 1
            });
            let entry = &mut entries[at];
            entry.stated = entry.stated.strictest(u.stated);
            entry.lines.push((u.line, u.vocabulary, u.stated));
        }
        UsageSet {
            paths: RuleSet::build(&self.strings, &rules),
            entries,
        }
    }
}

impl Policy {
    /// An approximation of the heap this policy holds (allocator rounding
    /// aside), for byte-budgeted caches.
    pub fn heap_size(&self) -> usize {
        self.sets.capacity() * std::mem::size_of::<AgentRules>()
            + self
                .sets
                .iter()
                .map(|s| {
                    s.name.capacity()
                        + s.lines.capacity() * 4
                        + s.rules.heap_size()
                        + s.visits.capacity() * std::mem::size_of::<VisitTime>()
                        + s.usage.as_ref().map_or(0, |u| {
                            u.paths.heap_size()
                                + u.entries.capacity() * std::mem::size_of::<UsageEntry>()
                                + u.entries
                                    .iter()
                                    .map(|e| e.lines.capacity() * 12)
                                    .sum::<usize>()
                        })
                })
                .sum::<usize>()
            + self.uses.capacity()
    }
}

impl Policy {
    fn new(selected: Selected, sets: Vec<AgentRules>) -> Policy {
        let crawl_delay = sets
            .iter()
            .filter_map(|s| s.crawl_delay)
            .fold(None, |acc: Option<Delay>, d| Some(d.larger(acc)));
        Policy {
            selected,
            sets,
            crawl_delay,
            uses: Vec::new(),
        }
    }

    /// The policy when there is no robots.txt (RFC 9309 §2.3.1.3): everything allowed.
    pub fn allow_all() -> Policy {
        Policy {
            selected: Selected::Nothing,
            sets: Vec::new(),
            crawl_delay: None,
            uses: Vec::new(),
        }
    }

    /// Decides a path with query (`/a/b?c`) or a Gopher selector, as it is sent.
    ///
    /// Percent-encoding is normalised here; dot segments are the caller's to remove
    /// (see [`crate::target`]), because whether they mean anything depends on the
    /// protocol.
    #[inline]
    pub fn decide(&self, target: &str) -> Decision {
        self.decide_bytes(target.as_bytes())
    }

    /// [`decide`](Self::decide) for targets that are bytes (Gopher selectors).
    pub fn decide_bytes(&self, target: &[u8]) -> Decision {
        let mut unbounded = u64::MAX;
        self.decide_counted(target, &mut unbounded)
    }

    /// [`decide_bytes`](Self::decide_bytes) spending at most `budget`
    /// wildcard searches (each a search of the target per piece of a rule
    /// holding `*`), taken from it; `None` when they ran out before the
    /// decision was made. A caller deciding many spellings of one target
    /// shares one budget among them, so a file of thousands of wildcard rules
    /// costs a bounded amount of work per request, not thousands per spelling.
    pub fn decide_within(&self, target: &[u8], budget: &mut u64) -> Option<Decision> {
        let decision = self.decide_counted(target, budget);
        (*budget > 0).then_some(decision)
    }

    fn decide_counted(&self, target: &[u8], budget: &mut u64) -> Decision {
        // One pass both checks that the target needs no normalising (the common
        // case) and takes its signature for the wildcard rules.
        if let Some(sig) = scan_normal_target(target) {
            self.decide_normal(target, Some(sig), budget)
        } else {
            let mut buf = StackBuf::new();
            normalize(target, Mode::Target, &mut buf);
            self.decide_normal(buf.as_bytes(), NO_SIGNATURE, budget)
        }
    }

    fn decide_normal(&self, path: &[u8], sig: Option<u64>, budget: &mut u64) -> Decision {
        // The robots.txt file is always allowed: `/robots.txt`, and the Gopher
        // selectors a robot fetches it by.
        if matches!(path, b"/robots.txt" | b"robots.txt" | b"0/robots.txt") {
            return Decision {
                allowed: true,
                reason: Reason::RobotsTxtItself,
            };
        }
        if self.sets.is_empty() {
            return Decision {
                allowed: true,
                reason: Reason::NoGroup,
            };
        }
        let mut first: Option<Decision> = None;
        for (i, set) in self.sets.iter().enumerate() {
            let set_index = i as u16;
            let decision = match set.rules.best(path, sig, budget) {
                Some(rule) => Decision {
                    allowed: set.rules.rule(rule).0.kind == RuleKind::Allow,
                    reason: Reason::Rule {
                        set: set_index,
                        rule,
                    },
                },
                None => Decision {
                    allowed: true,
                    reason: Reason::NoMatchingRule { set: set_index },
                },
            };
            // Several virtual agents: the most restrictive combination wins
            // (Gemini companion spec): one disallow decides.
            if !decision.allowed {
                return decision;
            }
            first.get_or_insert(decision);
        }
        // Allowed by the rules: a preference may still refuse a declared use
        // (a path the rules disallow is refused for that alone).
        for (i, set) in self.sets.iter().enumerate() {
            if let Some(refused) = self.usage_refusal(i as u16, set, path, sig, budget) {
                return refused;
            }
        }
        first.unwrap_or(Decision {
            allowed: true,
            reason: Reason::NoGroup,
        })
    }

    /// The first of the bot's declared uses that `set`'s preferences for
    /// `path` refuse (the longest matching path's lines; lines of equally
    /// long paths combine to the most restrictive).
    fn usage_refusal(
        &self,
        set_index: u16,
        set: &AgentRules,
        path: &[u8],
        sig: Option<u64>,
        budget: &mut u64,
    ) -> Option<Decision> {
        let usage = set.usage.as_ref()?;
        let matched = usage.paths.longest_matches(path, sig, budget);
        let entry_of = |rule: u32| usage.paths.rule(rule).0.line;
        let stated = matched
            .iter()
            .map(|&r| usage.entries[entry_of(r) as usize].stated)
            .fold(Stated::default(), Stated::strictest);
        self.uses.iter().find_map(|&use_| {
            let (category, allowed) = stated.resolve(use_)?;
            if allowed {
                return None;
            }
            // The entry that said no, among the equally long paths.
            let entry = matched
                .iter()
                .map(|&r| entry_of(r))
                .find(|&e| usage.entries[e as usize].stated.get(category) == Some(false))?;
            Some(Decision {
                allowed: false,
                reason: Reason::Usage {
                    set: set_index,
                    entry,
                    category,
                },
            })
        })
    }

    /// The group and rule behind `decision`, which this policy made.
    pub fn explain(&self, decision: &Decision) -> Explanation<'_> {
        let group = |set: u16| {
            self.sets.get(set as usize).map(|s| GroupInfo {
                name: &s.name,
                selected: self.selected,
                lines: &s.lines,
            })
        };
        let mut usage = None;
        let (group, rule) = match decision.reason {
            Reason::RobotsTxtItself | Reason::NoGroup => (None, None),
            Reason::NoMatchingRule { set } => (group(set), None),
            Reason::Usage {
                set,
                entry,
                category,
            } => {
                usage = self
                    .sets
                    .get(set as usize)
                    .and_then(|s| s.usage.as_ref()?.entries.get(entry as usize))
                    .and_then(|e| {
                        e.lines
                            .iter()
                            .find(|(_, _, stated)| stated.get(category) == Some(false))
                    })
                    .map(|&(line, vocabulary, _)| Preference {
                        vocabulary,
                        category,
                        allowed: false,
                        line,
                    });
                (group(set), None)
            }
            Reason::Rule { set, rule } => (
                group(set),
                self.sets.get(set as usize).map(|s| {
                    let (r, pattern) = s.rules.rule(rule);
                    RuleInfo {
                        kind: r.kind,
                        pattern,
                        line: r.line,
                    }
                }),
            ),
        };
        Explanation {
            allowed: decision.allowed,
            group,
            rule,
            usage,
            robots_txt_itself: decision.reason == Reason::RobotsTxtItself,
        }
    }

    /// Whether the applying groups have `Visit-time` windows.
    pub fn has_visit_times(&self) -> bool {
        self.sets.iter().any(|s| !s.visits.is_empty())
    }

    /// When robots.txt's `Visit-time` keeps this bot away at `unix` (seconds
    /// since the epoch, UTC): how long until it may visit, and a window it
    /// waits for. Each applying group that has windows must be in one of
    /// them; `None`: it may visit now.
    pub fn visit_wait(&self, unix: Duration) -> Option<(Duration, VisitTime)> {
        let day = 86_400;
        let now = unix.as_secs() % day;
        let sub = Duration::from_nanos(u64::from(unix.subsec_nanos()));
        let mut longest: Option<(Duration, VisitTime)> = None;
        for set in self.sets.iter().filter(|s| !s.visits.is_empty()) {
            let inside = |w: &VisitTime| {
                let (from, to) = (u64::from(w.from) * 60, u64::from(w.to) * 60);
                match from < to {
                    true => (from..to).contains(&now),
                    false => now >= from || now < to,
                }
            };
            if set.visits.iter().any(inside) {
                continue;
            }
            // The window that opens first.
            let soonest = set
                .visits
                .iter()
                .map(|w| {
                    let secs = (u64::from(w.from) * 60 + day - now) % day;
                    (Duration::from_secs(secs).saturating_sub(sub), *w)
                })
                .min_by_key(|(d, _)| *d);
            if let Some(wait) = soonest {
                if longest.is_none_or(|(d, _)| wait.0 > d) {
                    longest = Some(wait);
                }
            }
        }
        longest
    }

    /// Which rank of groups applies to the bot.
    pub fn selected(&self) -> Selected {
        self.selected
    }

    /// The crawl-delay of the applying groups in seconds (the largest, when several).
    pub fn crawl_delay_secs(&self) -> Option<f64> {
        self.crawl_delay.map(|d| d.secs)
    }

    /// The line (1-based) of the Crawl-delay (or Request-rate) that
    /// [`crawl_delay_secs`](Self::crawl_delay_secs) comes from.
    pub fn crawl_delay_line(&self) -> Option<u32> {
        self.crawl_delay.map(|d| d.line)
    }

    /// [`crawl_delay_secs`](Self::crawl_delay_secs) as a `Duration`; absurdly large
    /// values saturate.
    pub fn crawl_delay(&self) -> Option<Duration> {
        self.crawl_delay
            .map(|d| Duration::try_from_secs_f64(d.secs).unwrap_or(Duration::MAX))
    }

    /// The lines (1-based) this policy was built from: the agent lines of the
    /// groups that apply and their rules, in order.
    pub fn source_lines(&self) -> Vec<u32> {
        let mut lines: Vec<u32> = self
            .sets
            .iter()
            .flat_map(|set| {
                let rules = (0..set.rules.len()).map(|i| set.rules.rule(i as u32).0.line);
                set.lines.iter().copied().chain(rules)
            })
            .collect();
        lines.sort_unstable();
        lines.dedup();
        lines
    }

    /// How many rules the applying groups hold.
    pub fn rule_count(&self) -> usize {
        self.sets.iter().map(|s| s.rules.len()).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_lines_that_apply_are_the_groups_agents_and_rules() {
        let robots = RobotsTxt::parse(
            b"User-agent: other\nDisallow: /x\n\nUser-agent: examplebot\nUser-agent: also\nDisallow: /a\nAllow: /a/b\n\nUser-agent: *\nDisallow: /\n",
        );
        let policy = robots.policy(&BotProfile::new("examplebot"));
        // Line 5 names another agent of the same group: not this bot's.
        assert_eq!(policy.source_lines(), [4, 6, 7]);
        let star = robots.policy(&BotProfile::new("nobody"));
        assert_eq!(star.source_lines(), [9, 10]);
    }
}
