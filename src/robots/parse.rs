//! robots.txt bytes → groups of agents and rules.
//!
//! RFC 9309 §2.1–2.2 with the tolerance of real files: a UTF-8 byte order mark is
//! skipped (a partial one too), lines end in LF, CRLF or CR, `#` starts a comment,
//! field names are case-insensitive, unknown fields are ignored, and nothing in
//! the input can make the parser fail or panic. Only the first [`PARSE_LIMIT`]
//! bytes are read (RFC 9309 §2.5 asks for at least 500 KiB).
//!
//! A group is a run of `User-agent:` / `Virtual-agent:` lines followed by rules.
//! Blank lines, comments, `Sitemap:`, `Crawl-delay:` and unknown lines do not
//! end a run of agent lines (RFC 9309 §2.2.4: records the RFC does not define
//! do not interfere with it; Google's reference parser agrees); the next agent
//! line after an `Allow`/`Disallow` starts a new group. A `Crawl-delay` belongs
//! to the agent lines just before it (since the group began or since the last
//! `Crawl-delay`), as files are written: `User-agent: a`, `Crawl-delay: 1`,
//! `User-agent: b`, `Crawl-delay: 5`. Rules before any agent line belong to no
//! group.

use std::sync::Arc;

use super::encoding::{normalized_string, Mode};
use super::lines::{Line, Lines};
use super::usage::{self, Stated, Vocabulary};

/// How many bytes of a robots.txt are parsed; the rest is ignored.
pub const PARSE_LIMIT: usize = 500 * 1024;

/// Which namespace an agent line names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentKind {
    /// `User-agent:` (the product token, a companion-spec virtual agent, or `*`).
    User,
    /// `Virtual-agent:` (the Gemini mailing-list proposal).
    Virtual,
}

/// `Allow` or `Disallow`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleKind {
    Allow,
    Disallow,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "Allow",
            RuleKind::Disallow => "Disallow",
        }
    }
}

/// A byte range in [`RobotsTxt::strings`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Span {
    pub(crate) start: u32,
    pub(crate) end: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Agent {
    pub(crate) kind: AgentKind,
    /// Lower-cased product token, or `*`.
    pub(crate) name: Span,
    pub(crate) line: u32,
    /// The largest valid `Crawl-delay` after this agent line in its group.
    pub(crate) crawl_delay: Option<Delay>,
    /// The `Visit-time` windows after this agent line in its group (indices
    /// of [`RobotsTxt::visits`]): like a Crawl-delay, they belong to the run
    /// of agent lines just before them, not to every agent of the group.
    pub(crate) visits: std::ops::Range<u32>,
}

/// A `Crawl-delay` (or `Request-rate`) value in seconds, and its line.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Delay {
    pub(crate) secs: f64,
    pub(crate) line: u32,
}

impl Delay {
    /// The larger of two delays (the earlier line on a tie): two delays for
    /// one agent, the larger is the safe reading.
    pub(crate) fn larger(self, other: Option<Delay>) -> Delay {
        match other {
            Some(o) if o.secs > self.secs || (o.secs == self.secs && o.line < self.line) => o,
            _ => self,
        }
    }
}

#[derive(Clone, Debug)]
pub(crate) struct Rule {
    pub(crate) kind: RuleKind,
    /// The pattern in normal form (see `encoding`).
    pub(crate) pattern: Span,
    /// Whether the pattern holds a wildcard `*`.
    pub(crate) wild: bool,
    pub(crate) line: u32,
}

#[derive(Clone, Debug)]
pub(crate) struct Group {
    pub(crate) agents: std::ops::Range<u32>,
    pub(crate) rules: std::ops::Range<u32>,
    pub(crate) usages: std::ops::Range<u32>,
}

/// A `Content-Usage:` or `Content-Signal:` line of a group: the paths it
/// covers (`/` when it names none) and what it states.
#[derive(Clone, Debug)]
pub(crate) struct UsageLine {
    pub(crate) pattern: Span,
    pub(crate) wild: bool,
    pub(crate) stated: Stated,
    pub(crate) vocabulary: Vocabulary,
    pub(crate) line: u32,
}

/// A `Visit-time: HHMM-HHMM` line of a group (UTC): visits only then.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VisitTime {
    /// Minutes after midnight, UTC: from (included), to (excluded); a `to`
    /// before `from` crosses midnight.
    pub from: u16,
    pub to: u16,
    pub line: u32,
}

/// A parsed robots.txt: parse once, then build a [`Policy`](super::Policy) per bot.
#[derive(Clone, Debug, Default)]
pub struct RobotsTxt {
    pub(crate) groups: Vec<Group>,
    pub(crate) agents: Vec<Agent>,
    pub(crate) rules: Vec<Rule>,
    pub(crate) usages: Vec<UsageLine>,
    pub(crate) visits: Vec<VisitTime>,
    /// Arena for agent names and patterns: one allocation instead of one per
    /// line, shared with the policies built from this file (they keep no copy).
    pub(crate) strings: Arc<Vec<u8>>,
    bytes_parsed: usize,
    truncated: bool,
    /// Lines that are robots.txt fields (agent lines, rules, crawl-delay, sitemap).
    field_lines: usize,
}

/// The fields this parser understands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    UserAgent,
    VirtualAgent,
    Allow,
    Disallow,
    CrawlDelay,
    /// `Request-rate: n/period`: read as a Crawl-delay of `period / n`.
    RequestRate,
    /// `Content-Usage:` (AIPREF) and `Content-Signal:` (Cloudflare).
    Usage(Vocabulary),
    /// `Visit-time: HHMM-HHMM` (the 1996 extended standard).
    VisitTime,
    Sitemap,
    Other,
}

/// The field a name (blanks around it allowed) names.
fn field(name: &[u8]) -> Field {
    // The spellings nearly every file uses, compared as they are; any other
    // spelling is trimmed and lower-cased below.
    match name {
        b"Disallow" => return Field::Disallow,
        b"Allow" => return Field::Allow,
        b"User-agent" | b"User-Agent" => return Field::UserAgent,
        _ => {}
    }
    let name = trim(name);
    let mut lower = [0u8; 16];
    let Some(lower) = lower.get_mut(..name.len()) else {
        return Field::Other;
    };
    for (l, b) in lower.iter_mut().zip(name) {
        *l = b.to_ascii_lowercase();
    }
    // Spellings seen in the wild are accepted as Google's parser does; a typo
    // never allows more, since `Allow` gets no such leniency.
    match &*lower {
        b"user-agent" | b"useragent" | b"user agent" => Field::UserAgent,
        b"disallow" | b"dissallow" | b"dissalow" | b"disalow" | b"diasllow" | b"disallaw" => {
            Field::Disallow
        }
        b"allow" => Field::Allow,
        b"virtual-agent" => Field::VirtualAgent,
        b"crawl-delay" => Field::CrawlDelay,
        b"request-rate" => Field::RequestRate,
        b"content-usage" => Field::Usage(Vocabulary::ContentUsage),
        b"content-signal" => Field::Usage(Vocabulary::ContentSignal),
        b"visit-time" => Field::VisitTime,
        b"sitemap" => Field::Sitemap,
        _ => Field::Other,
    }
}

fn trim(s: &[u8]) -> &[u8] {
    let blank = |b: u8| b == b' ' || b == b'\t';
    let mut start = 0;
    while start < s.len() && blank(s[start]) {
        start += 1;
    }
    let mut end = s.len();
    while end > start && blank(s[end - 1]) {
        end -= 1;
    }
    &s[start..end]
}

/// Splits a line (comment already removed) into field name and value, given
/// where its first colon is. The value is trimmed; the name is left to
/// [`field`], which trims it only if it is not one of the usual spellings.
///
/// `name: value` is the form of RFC 9309. Like Google's parser we also accept a
/// missing colon when the line is exactly two words (`disallow /`), since a file
/// with that slip clearly meant the rule.
fn split_field(line: &[u8], colon: Option<usize>) -> Option<(&[u8], &[u8])> {
    if let Some(colon) = colon {
        return Some((&line[..colon], trim(&line[colon + 1..])));
    }
    let line = trim(line);
    if line.is_empty() {
        return None;
    }
    let ws = line.iter().position(|&b| b == b' ' || b == b'\t')?;
    let (name, value) = (&line[..ws], trim(&line[ws..]));
    if value.iter().any(|&b| b == b' ' || b == b'\t') {
        return None;
    }
    Some((name, value))
}

/// The product token a `User-agent` value names: `*`, or its leading run of
/// token characters, lower-cased (`ExampleBot/2.1 (+url)` names `examplebot`).
///
/// RFC 9309 §2.2.1 allows letters, `_` and `-` in a product token; we accept
/// digits too, because cutting `bot2` to `bot` would make it name another bot.
pub(crate) fn agent_token(value: &[u8]) -> Option<&[u8]> {
    if value.first() == Some(&b'*') {
        return match value.get(1) {
            None | Some(b' ' | b'\t') => Some(b"*"),
            _ => None,
        };
    }
    let len = value
        .iter()
        .position(|&b| !is_token_byte(b))
        .unwrap_or(value.len());
    (len > 0).then(|| &value[..len])
}

pub(crate) fn is_token_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// A `Crawl-delay` value in seconds: a non-negative decimal number. Anything else
/// (units, negative numbers, NaN, infinity) is ignored, as docs/architecture.md says.
fn parse_delay(value: &[u8]) -> Option<f64> {
    if value.is_empty() || !value.iter().all(|&b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let secs: f64 = std::str::from_utf8(value).ok()?.parse().ok()?;
    (secs.is_finite() && secs >= 0.0).then_some(secs)
}

/// A `Request-rate` value (the 1996 extended standard, still deployed):
/// `n/period`, the period in seconds or with a unit (`s`, `m`, `h`, `d`),
/// perhaps followed by a time of day it applies in (read as always: the
/// stricter reading). As a spacing: `period / n` seconds. Anything else is
/// ignored, as a bad `Crawl-delay` is.
fn parse_request_rate(value: &[u8]) -> Option<f64> {
    let value = value.split(|&b| b == b' ' || b == b'\t').next()?;
    let text = std::str::from_utf8(value).ok()?;
    let (n, period) = text.split_once('/')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: f64 = n.parse().ok()?;
    let unit_at = period
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(period.len());
    let (number, unit) = period.split_at(unit_at);
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "s" => 1.0,
        "m" => 60.0,
        "h" => 3600.0,
        "d" => 86_400.0,
        _ => return None,
    };
    let period = parse_delay(number.as_bytes())? * scale;
    let secs = period / n;
    (n >= 1.0 && secs.is_finite()).then_some(secs)
}

/// A `Visit-time` value: `HHMM-HHMM` (or `HH:MM-HH:MM`), UTC; the two ends
/// differ. Anything else is ignored, as a bad `Crawl-delay` is.
fn parse_visit_time(value: &[u8]) -> Option<(u16, u16)> {
    let text = std::str::from_utf8(value).ok()?;
    let (from, to) = text.split_once('-')?;
    let minute = |t: &str| -> Option<u16> {
        let t = t.trim();
        let (h, m) = match t.split_once(':') {
            Some(hm) => hm,
            None if t.len() == 4 => t.split_at(2),
            None => return None,
        };
        let digits = |s: &str| s.len() == 2 && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(h) || !digits(m) {
            return None;
        }
        let (h, m): (u16, u16) = (h.parse().ok()?, m.parse().ok()?);
        (h < 24 && m < 60).then_some(h * 60 + m)
    };
    let (from, to) = (minute(from)?, minute(to)?);
    (from != to).then_some((from, to))
}

/// Gives a run of agent lines the crawl-delay and the `Visit-time` windows
/// that followed them, if any.
fn give_run(run: &mut [Agent], delay: Option<Delay>, visits: std::ops::Range<u32>) {
    if delay.is_none() && visits.is_empty() {
        return;
    }
    for agent in run {
        if delay.is_some() {
            agent.crawl_delay = delay;
        }
        agent.visits = visits.clone();
    }
}

fn skip_bom(input: &[u8]) -> &[u8] {
    const BOM: &[u8] = b"\xEF\xBB\xBF";
    let n = input.iter().zip(BOM).take_while(|(a, b)| a == b).count();
    &input[n..]
}

/// Appends the lower-cased `token` to `strings`.
fn push_lowercase(strings: &mut Vec<u8>, token: &[u8]) -> Span {
    let start = strings.len() as u32;
    strings.extend(token.iter().map(|b| b.to_ascii_lowercase()));
    Span {
        start,
        end: strings.len() as u32,
    }
}

/// Appends the normal form of a pattern to `strings`; true when it holds a `*`.
fn push_pattern(strings: &mut Vec<u8>, value: &[u8]) -> (Span, bool) {
    let start = strings.len() as u32;
    let wild = super::encoding::normalize(value, Mode::Pattern, strings);
    let span = Span {
        start,
        end: strings.len() as u32,
    };
    (span, wild)
}

impl RobotsTxt {
    /// Parses robots.txt bytes. Never fails: junk lines are ignored.
    pub fn parse(input: &[u8]) -> RobotsTxt {
        let truncated = input.len() > PARSE_LIMIT;
        let mut body = &input[..input.len().min(PARSE_LIMIT)];
        if truncated {
            // The last line was cut: drop it rather than act on half a rule
            // (`Allow: /private/public` cut to `Allow: /pr` would allow too much).
            let end = body
                .iter()
                .rposition(|&b| b == b'\n' || b == b'\r')
                .map_or(0, |i| i + 1);
            body = &body[..end];
        }
        let bytes_parsed = body.len();
        let body = skip_bom(body);

        let mut strings = Vec::with_capacity(body.len() / 2);
        // One line in twenty is a generous guess for real files; it saves the
        // reallocations that otherwise dominate a small parse.
        let mut groups: Vec<Group> = Vec::with_capacity(body.len() / 256 + 1);
        let mut agents: Vec<Agent> = Vec::with_capacity(body.len() / 64 + 1);
        let mut rules: Vec<Rule> = Vec::with_capacity(body.len() / 20 + 1);
        let mut usages: Vec<UsageLine> = Vec::new();
        let mut visits: Vec<VisitTime> = Vec::new();
        let mut field_lines = 0;
        // Whether the current group has had a rule line: the next agent line then
        // starts a new group instead of joining this one.
        let mut group_has_rules = false;
        // The agents a `Crawl-delay` (or `Request-rate`, `Visit-time`) line
        // applies to: those named since the group began or since the last
        // such line with agent lines after it.
        let mut delay_run_start = 0u32;
        let mut after_delay = false;
        // The run's `Visit-time` windows: `visits[run_visits..]`.
        let mut run_visits = 0u32;
        // The largest delay given to that run so far: set on its agents once,
        // when the run ends, so that a file of many agents and many delays
        // costs one pass, not one pass per delay.
        let mut run_delay: Option<Delay> = None;

        for Line {
            number,
            content,
            colon,
        } in Lines::new(body)
        {
            let Some((name, value)) = split_field(content, colon) else {
                continue;
            };
            let f = field(name);
            field_lines += usize::from(f != Field::Other);
            match f {
                f @ (Field::UserAgent | Field::VirtualAgent) => {
                    let run_ends = groups.is_empty() || group_has_rules || after_delay;
                    if run_ends {
                        let visited = run_visits..visits.len() as u32;
                        give_run(
                            &mut agents[delay_run_start as usize..],
                            run_delay.take(),
                            visited,
                        );
                        delay_run_start = agents.len() as u32;
                        run_visits = visits.len() as u32;
                        after_delay = false;
                    }
                    if groups.is_empty() || group_has_rules {
                        let at_agent = agents.len() as u32;
                        let at_rule = rules.len() as u32;
                        let at_usage = usages.len() as u32;
                        groups.push(Group {
                            agents: at_agent..at_agent,
                            rules: at_rule..at_rule,
                            usages: at_usage..at_usage,
                        });
                        group_has_rules = false;
                    }
                    // An unusable name still starts a group, so the rules under it
                    // are not taken for the group before.
                    if let Some(token) = agent_token(value) {
                        let name = push_lowercase(&mut strings, token);
                        agents.push(Agent {
                            kind: if f == Field::UserAgent {
                                AgentKind::User
                            } else {
                                AgentKind::Virtual
                            },
                            name,
                            line: number,
                            crawl_delay: None,
                            visits: 0..0,
                        });
                        let end = agents.len() as u32;
                        if let Some(g) = groups.last_mut() {
                            g.agents.end = end;
                        }
                    }
                }
                Field::Allow
                | Field::Disallow
                | Field::CrawlDelay
                | Field::RequestRate
                | Field::Usage(_)
                | Field::VisitTime
                    if groups.is_empty() => {}
                Field::Usage(vocabulary) => {
                    // A rule of its group, as Allow and Disallow are
                    // (draft-ietf-aipref-attach): the next agent line starts
                    // another group.
                    group_has_rules = true;
                    let Some((path, stated)) = usage::parse_line(vocabulary, value) else {
                        continue;
                    };
                    let (pattern, wild) = push_pattern(&mut strings, path.unwrap_or(b"/"));
                    usages.push(UsageLine {
                        pattern,
                        wild,
                        stated,
                        vocabulary,
                        line: number,
                    });
                    let end = usages.len() as u32;
                    if let Some(g) = groups.last_mut() {
                        g.usages.end = end;
                    }
                }
                Field::VisitTime => {
                    after_delay = true;
                    if let Some((from, to)) = parse_visit_time(value) {
                        visits.push(VisitTime {
                            from,
                            to,
                            line: number,
                        });
                    }
                }
                f @ (Field::Allow | Field::Disallow) => {
                    group_has_rules = true;
                    // An empty value is no rule: `Disallow:` allows everything.
                    if value.is_empty() {
                        continue;
                    }
                    let (pattern, wild) = push_pattern(&mut strings, value);
                    rules.push(Rule {
                        kind: if f == Field::Allow {
                            RuleKind::Allow
                        } else {
                            RuleKind::Disallow
                        },
                        pattern,
                        wild,
                        line: number,
                    });
                    let end = rules.len() as u32;
                    if let Some(g) = groups.last_mut() {
                        g.rules.end = end;
                    }
                }
                f @ (Field::CrawlDelay | Field::RequestRate) => {
                    after_delay = true;
                    let secs = match f {
                        Field::CrawlDelay => parse_delay(value),
                        _ => parse_request_rate(value),
                    };
                    if let Some(secs) = secs {
                        let line = number;
                        run_delay = Some(Delay { secs, line }.larger(run_delay));
                    }
                }
                Field::Sitemap | Field::Other => {}
            }
        }
        let visited = run_visits..visits.len() as u32;
        give_run(&mut agents[delay_run_start as usize..], run_delay, visited);
        RobotsTxt {
            groups,
            agents,
            rules,
            usages,
            visits,
            strings: Arc::new(strings),
            bytes_parsed,
            truncated,
            field_lines,
        }
    }

    /// An agent name or a pattern: ASCII, see `agent_token` and `encoding`.
    pub(crate) fn bytes(&self, span: Span) -> &[u8] {
        &self.strings[span.start as usize..span.end as usize]
    }

    /// How many bytes were parsed (at most [`PARSE_LIMIT`]).
    pub fn bytes_parsed(&self) -> usize {
        self.bytes_parsed
    }

    /// True when the input was longer than [`PARSE_LIMIT`] and its tail was ignored.
    pub fn truncated(&self) -> bool {
        self.truncated
    }

    /// How many lines are robots.txt fields. Zero means the bytes are not a
    /// robots.txt at all: Gopher servers answer a missing file with an error page.
    pub fn field_lines(&self) -> usize {
        self.field_lines
    }

    /// How many groups the file has (merged or not).
    pub fn group_count(&self) -> usize {
        self.groups.len()
    }

    /// How many `Allow`/`Disallow` rules the file has in groups.
    pub fn rule_count(&self) -> usize {
        self.rules.len()
    }

    /// An approximation of the memory this value holds, for byte-budgeted caches.
    pub fn heap_size(&self) -> usize {
        // The arena's Arc: its two counts and the `Vec`, besides the bytes.
        16 + std::mem::size_of::<Vec<u8>>()
            + self.strings.capacity()
            + self.groups.capacity() * std::mem::size_of::<Group>()
            + self.agents.capacity() * std::mem::size_of::<Agent>()
            + self.rules.capacity() * std::mem::size_of::<Rule>()
            + self.usages.capacity() * std::mem::size_of::<UsageLine>()
            + self.visits.capacity() * std::mem::size_of::<VisitTime>()
    }
}

/// The normal form of a single pattern, for callers that hold one outside a file.
pub fn normalize_pattern(pattern: &str) -> String {
    normalized_string(pattern.as_bytes(), Mode::Pattern)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agents(r: &RobotsTxt, g: usize) -> Vec<(AgentKind, String, u32)> {
        let g = &r.groups[g];
        r.agents[g.agents.start as usize..g.agents.end as usize]
            .iter()
            .map(|a| {
                (
                    a.kind,
                    String::from_utf8_lossy(r.bytes(a.name)).into_owned(),
                    a.line,
                )
            })
            .collect()
    }

    fn rules(r: &RobotsTxt, g: usize) -> Vec<(RuleKind, String, u32)> {
        let g = &r.groups[g];
        r.rules[g.rules.start as usize..g.rules.end as usize]
            .iter()
            .map(|x| {
                (
                    x.kind,
                    String::from_utf8_lossy(r.bytes(x.pattern)).into_owned(),
                    x.line,
                )
            })
            .collect()
    }

    fn delays(r: &RobotsTxt, g: usize) -> Vec<Option<f64>> {
        let g = &r.groups[g];
        r.agents[g.agents.start as usize..g.agents.end as usize]
            .iter()
            .map(|a| a.crawl_delay.map(|d| d.secs))
            .collect()
    }

    /// RFC 9309 §2.2.4: a record the RFC does not define, `Crawl-delay` among
    /// them, does not end a run of agent lines; the delay is its agents'.
    #[test]
    fn crawl_delay_does_not_end_the_agent_run() {
        let r = RobotsTxt::parse(b"User-agent: a\nCrawl-delay: 1\nUser-agent: b\nDisallow: /\n");
        assert_eq!(r.groups.len(), 1);
        assert_eq!(agents(&r, 0).len(), 2);
        assert_eq!(rules(&r, 0), [(RuleKind::Disallow, "/".into(), 4)]);
        assert_eq!(delays(&r, 0), [Some(1.0), None]);
        let r = RobotsTxt::parse(
            b"User-agent: a\nUser-agent: b\nCrawl-delay: 2\nCrawl-delay: 3\nUser-agent: c\n\
              Crawl-delay: 5\nDisallow: /x\nCrawl-delay: 7\n",
        );
        assert_eq!(delays(&r, 0), [Some(3.0), Some(3.0), Some(7.0)]);
        // A delay stays with its group: the next group's agents get none of it.
        let r = RobotsTxt::parse(
            b"User-agent: a\nCrawl-delay: 2\nDisallow: /\nUser-agent: b\nDisallow: /y\n",
        );
        assert_eq!(
            (delays(&r, 0), delays(&r, 1)),
            (vec![Some(2.0)], vec![None])
        );
        // Thousands of agents, then thousands of delays: each agent gets the
        // largest, in one pass (each delay used to walk every agent again).
        let mut file = String::new();
        for i in 0..5000 {
            file.push_str(&format!("User-agent: a{i}\n"));
        }
        for i in 0..5000 {
            file.push_str(&format!("Crawl-delay: {}\n", i % 97));
        }
        let r = RobotsTxt::parse(file.as_bytes());
        assert!(delays(&r, 0).iter().all(|d| *d == Some(96.0)));
        let r = RobotsTxt::parse(b"User-agent: a\nFoo: bar\nUser-agent: b\nDisallow: /\n");
        assert_eq!(r.groups.len(), 1);
    }

    #[test]
    fn line_endings_bom_comments_and_case() {
        for body in [
            "\u{feff}User-Agent: A\nDISALLOW: /x # why\n",
            "User-Agent: A\r\nDISALLOW: /x # why\r\n",
            "User-Agent: A\rDISALLOW: /x # why\r",
            "\u{feff}User-Agent: A\r\nDISALLOW: /x# why",
        ] {
            let r = RobotsTxt::parse(body.as_bytes());
            assert_eq!(r.groups.len(), 1, "{body:?}");
            assert_eq!(
                agents(&r, 0),
                [(AgentKind::User, "a".into(), 1)],
                "{body:?}"
            );
            assert_eq!(
                rules(&r, 0),
                [(RuleKind::Disallow, "/x".into(), 2)],
                "{body:?}"
            );
        }
    }

    #[test]
    fn partial_bom_is_skipped() {
        let r = RobotsTxt::parse(b"\xEF\xBBUser-agent: a\nDisallow: /\n");
        assert_eq!(agents(&r, 0)[0].1, "a");
    }

    #[test]
    fn line_numbers_count_crlf_once_and_blank_lines() {
        let r = RobotsTxt::parse(b"# c\r\n\r\nuser-agent: a\r\rdisallow: /q\n");
        assert_eq!(agents(&r, 0)[0].2, 3);
        assert_eq!(rules(&r, 0)[0].2, 5);
    }

    #[test]
    fn groups_and_rules_outside_groups() {
        let body = "allow: /before\nuser-agent: a\n\nuser-agent: b\nsitemap: x\ndisallow: /1\n\
                    crawl-delay: 3\nuser-agent: c\nallow: /2\n";
        let r = RobotsTxt::parse(body.as_bytes());
        assert_eq!(r.groups.len(), 2);
        assert_eq!(
            agents(&r, 0),
            [
                (AgentKind::User, "a".into(), 2),
                (AgentKind::User, "b".into(), 4)
            ]
        );
        assert_eq!(rules(&r, 0), [(RuleKind::Disallow, "/1".into(), 6)]);
        assert_eq!(delays(&r, 0), [Some(3.0), Some(3.0)]);
        assert_eq!(rules(&r, 1), [(RuleKind::Allow, "/2".into(), 9)]);
    }

    #[test]
    fn virtual_agent_lines_and_tokens() {
        let r = RobotsTxt::parse(
            b"User-agent: ExampleBot/2.1 (+gemini://x)\nVirtual-agent: Indexer\nUser-agent: *\n\
              User-agent: */bad\nDisallow: /",
        );
        assert_eq!(
            agents(&r, 0),
            [
                (AgentKind::User, "examplebot".into(), 1),
                (AgentKind::Virtual, "indexer".into(), 2),
                (AgentKind::User, "*".into(), 3)
            ]
        );
    }

    #[test]
    fn empty_rules_are_no_rules_but_still_close_the_agent_run() {
        let r = RobotsTxt::parse(b"user-agent: a\ndisallow:\nuser-agent: b\ndisallow: /\n");
        assert_eq!(r.groups.len(), 2);
        assert!(rules(&r, 0).is_empty());
    }

    #[test]
    fn request_rate_is_a_crawl_delay_of_period_over_n() {
        let cases: &[(&str, Option<f64>)] = &[
            ("1/5", Some(5.0)),
            ("1/10s", Some(10.0)),
            ("2/1m", Some(30.0)),
            ("60/1h", Some(60.0)),
            ("1/1d", Some(86_400.0)),
            ("1/10s 1300-1659", Some(10.0)),
            ("4/1", Some(0.25)),
            ("0/5", None),
            ("-1/5", None),
            ("1/-5", None),
            ("1/5y", None),
            ("1/", None),
            ("/5", None),
            ("1/inf", None),
            ("1/NaN", None),
            ("five", None),
            ("", None),
        ];
        for (value, want) in cases {
            let r = RobotsTxt::parse(format!("user-agent: a\nrequest-rate: {value}\n").as_bytes());
            assert_eq!(delays(&r, 0), [*want], "request-rate {value:?}");
        }
        // With a Crawl-delay, in either order: the stricter (longer) spacing.
        let r = RobotsTxt::parse(b"User-agent: a\nCrawl-delay: 3\nRequest-rate: 1/10\n");
        assert_eq!(delays(&r, 0), [Some(10.0)]);
        let r = RobotsTxt::parse(b"User-agent: a\nRequest-rate: 1/2\nCrawl-delay: 3\n");
        assert_eq!(delays(&r, 0), [Some(3.0)]);
        // Before any group: nobody's.
        let r = RobotsTxt::parse(b"Request-rate: 1/10\nUser-agent: a\nDisallow: /x\n");
        assert_eq!(delays(&r, 0), [None]);
    }

    #[test]
    fn crawl_delay_values() {
        let cases: &[(&str, Option<f64>)] = &[
            ("10", Some(10.0)),
            ("2.5", Some(2.5)),
            ("0", Some(0.0)),
            ("-1", None),
            ("10s", None),
            ("NaN", None),
            ("inf", None),
            ("", None),
            ("1.2.3", None),
        ];
        for (value, want) in cases {
            let r = RobotsTxt::parse(format!("user-agent: a\ncrawl-delay: {value}\n").as_bytes());
            assert_eq!(delays(&r, 0), [*want], "crawl-delay {value:?}");
        }
        let r = RobotsTxt::parse(b"user-agent: a\ncrawl-delay: 3\ncrawl-delay: 7\ncrawl-delay: 1");
        assert_eq!(delays(&r, 0), [Some(7.0)]);
    }

    #[test]
    fn missing_colon_only_for_two_words() {
        let r = RobotsTxt::parse(b"user-agent foo\ndisallow /x\ndisallow /y z\n");
        assert_eq!(agents(&r, 0)[0].1, "foo");
        assert_eq!(rules(&r, 0), [(RuleKind::Disallow, "/x".into(), 2)]);
    }

    #[test]
    fn typos_of_disallow_are_read_as_disallow() {
        let r = RobotsTxt::parse(b"useragent: a\ndissallow: /x\ndisalow: /y\n");
        assert_eq!(rules(&r, 0).len(), 2);
        assert!(rules(&r, 0).iter().all(|r| r.0 == RuleKind::Disallow));
    }

    /// Blanks around a field name or value, in any spelling of the name,
    /// change nothing; blanks inside a name make it another name.
    #[test]
    fn blanks_around_names_and_values() {
        let r = RobotsTxt::parse(
            b"\t User-agent \t:\tA \nDisallow :/x\n  Allow\t: /y \n DISALLOW:\t/z\t\nDis allow: /w\n",
        );
        assert_eq!(agents(&r, 0), [(AgentKind::User, "a".to_string(), 1)]);
        let got: Vec<(RuleKind, String)> =
            rules(&r, 0).into_iter().map(|(k, p, _)| (k, p)).collect();
        assert_eq!(
            got,
            [
                (RuleKind::Disallow, "/x".to_string()),
                (RuleKind::Allow, "/y".to_string()),
                (RuleKind::Disallow, "/z".to_string()),
            ]
        );
    }

    #[test]
    fn limit_drops_the_cut_line() {
        let mut body = b"user-agent: a\n".to_vec();
        while body.len() < PARSE_LIMIT - 20 {
            body.extend_from_slice(b"# padding padding\n");
        }
        body.extend_from_slice(b"allow: /private/public/and/more\ndisallow: /after\n");
        let r = RobotsTxt::parse(&body);
        assert!(r.truncated());
        assert!(r.bytes_parsed() <= PARSE_LIMIT);
        assert!(
            rules(&r, 0).is_empty(),
            "the cut allow line must not become `allow: /pr`"
        );
    }

    #[test]
    fn field_lines_tell_a_robots_txt_from_an_error_page() {
        let cases: &[(&str, usize)] = &[
            ("User-agent: *\nDisallow: /x\n", 2),
            ("Sitemap: gopher://h/0/map\n", 1),
            ("Error: File or directory not found! (null)\r\n____\r\n", 0),
            ("3'/robots.txt' does not exist\terror.host\t1\r\n.\r\n", 0),
            ("", 0),
        ];
        for (body, want) in cases {
            assert_eq!(
                RobotsTxt::parse(body.as_bytes()).field_lines(),
                *want,
                "{body:?}"
            );
        }
    }

    #[test]
    fn binary_garbage_is_ignored() {
        let r = RobotsTxt::parse(
            b"\x00\xff\xfe junk\nuser-agent: \x00\n\x89PNG\r\n\x1a\ndisallow: /\xff\n",
        );
        assert!(r.groups.iter().all(|g| g.agents.is_empty()));
        assert!(r.bytes(r.rules[0].pattern).is_ascii());
    }
}
