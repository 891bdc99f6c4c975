//! The resolvers of `[access]`, `[bot]` and `[[bots]]`: who may use the proxy,
//! and as which bot. Every user, certificate and range picks one bot only.

use super::raw::RawBotLimits;
use super::values::{bound, count, duration};
use super::{invalid, ConfigError, RawConfig};
use crate::access::Access;
use crate::addr::Prefix;
use crate::bots::limits::{BotLimits, DayWindow, HttpMethods, Mode, Rate};
use crate::bots::{Bot, Bots, Fingerprint};
use crate::cli::RunArgs;
use crate::listener::Listens;
use crate::metrics::NO_BOT;
use crate::robots::{valid_product_token, valid_virtual_agent, BotProfile, Use};

/// `[bot]`, `--agent` and `--virtual-agent`: the default bot's profile, or
/// `None` when there is no default bot (`[[bots]]` without `[bot]` or flags).
fn default_bot(
    raw: &RawConfig,
    flags: &RunArgs,
) -> Result<Option<(String, BotProfile)>, ConfigError> {
    let section = raw.bot.as_ref();
    let has_default = section.is_some()
        || flags.agent.is_some()
        || !flags.virtual_agents.is_empty()
        || raw.bots.is_empty();
    if !has_default {
        return Ok(None);
    }
    let (agent_key, agent) = match &flags.agent {
        Some(a) => ("--agent", a.clone()),
        None => (
            "bot.agent",
            section.and_then(|b| b.agent.clone()).unwrap_or_default(),
        ),
    };
    let virtual_agents = if flags.virtual_agents.is_empty() {
        section
            .and_then(|b| b.virtual_agents.clone())
            .unwrap_or_default()
    } else {
        flags.virtual_agents.clone()
    };
    // An empty token is the anonymous bot: only `*` groups apply to it.
    let profile = bot_profile(agent_key, "bot.virtual_agents", &agent, &virtual_agents)?;
    let name = section
        .and_then(|b| b.name.clone())
        .unwrap_or_else(|| "default".to_string());
    Ok(Some((name, profile)))
}

/// A bot's robots.txt identity, each error naming its key. An empty `agent`
/// is the anonymous bot.
fn bot_profile(
    agent_key: &'static str,
    virtual_key: &'static str,
    agent: &str,
    virtual_agents: &[String],
) -> Result<BotProfile, ConfigError> {
    if !agent.is_empty() && !valid_product_token(agent) {
        return Err(invalid(
            agent_key,
            format!("{agent:?} is not a product token (letters, digits, '_' and '-', optionally /VERSION)"),
        ));
    }
    if let Some(v) = virtual_agents.iter().find(|v| !valid_virtual_agent(v)) {
        return Err(invalid(virtual_key, format!("{v:?} is not one word")));
    }
    Ok(virtual_agents
        .iter()
        .fold(BotProfile::new(agent), |b, v| b.with_virtual_agent(v)))
}

/// The longest name a bot may have.
pub const MAX_BOT_NAME: usize = 64;

/// A bot's name: the `bot` label of metrics, so short and plain.
pub fn valid_bot_name(name: &str) -> bool {
    (1..=MAX_BOT_NAME).contains(&name.len())
        && name != NO_BOT
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `[bot]` and `[[bots]]`: every bot, which one is the default, and what
/// picks each, every user, certificate and range claimed by one bot only.
pub(super) fn bots(
    raw: &RawConfig,
    flags: &RunArgs,
    socks5_users: &[(String, String)],
    access: &Access,
) -> Result<Bots, ConfigError> {
    let mut bots: Vec<Bot> = Vec::new();
    let default = default_bot(raw, flags)?;
    if let Some((name, profile)) = default {
        if !valid_bot_name(&name) {
            return Err(invalid("bot.name", bad_name(&name)));
        }
        let mut bot = Bot::named(&name, profile);
        if let Some(section) = &raw.bot {
            bot.limits = bot_limits(&BOT_KEYS, &section.limits())?;
            bot.profile = declared_uses(&BOT_KEYS, &section.limits(), bot.profile)?;
        }
        bots.push(bot);
    }
    let has_default = !bots.is_empty();
    for entry in &raw.bots {
        let name = &entry.name;
        if !valid_bot_name(name) {
            return Err(invalid("bots.name", bad_name(name)));
        }
        if bots.iter().any(|b| &b.name == name) {
            return Err(invalid("bots.name", format!("two bots are named {name:?}")));
        }
        if entry.agent.is_empty() {
            return Err(invalid(
                "bots.agent",
                format!("bot {name:?}: give it its product token (the name robots.txt groups use)"),
            ));
        }
        let mut bot = Bot::named(
            name,
            bot_profile(
                "bots.agent",
                "bots.virtual_agents",
                &entry.agent,
                &entry.virtual_agents,
            )
            .map_err(|e| in_bot(name, e))?,
        );
        let socks5_user = |user: &str| match socks5_users.iter().any(|(u, _)| u == user) {
            true => Ok(user.to_string()),
            false => Err(format!("{user:?} is not a [socks5] users entry")),
        };
        bot.limits = bot_limits(&BOTS_KEYS, &entry.limits()).map_err(|e| in_bot(name, e))?;
        bot.profile =
            declared_uses(&BOTS_KEYS, &entry.limits(), bot.profile).map_err(|e| in_bot(name, e))?;
        bot.socks5_users = claim(
            ("bots.socks5_users", name),
            &entry.socks5_users,
            socks5_user,
            &bots,
            |b| &b.socks5_users,
        )?;
        bot.client_certs = claim(
            ("bots.client_certs", name),
            &entry.client_certs,
            Fingerprint::parse,
            &bots,
            |b| &b.client_certs,
        )?;
        bot.clients = claim(
            ("bots.clients", name),
            &entry.clients,
            Prefix::parse,
            &bots,
            |b| &b.clients,
        )?;
        if let Some(range) = bot
            .clients
            .iter()
            .find(|r| !access.allow_from.iter().any(|a| a.overlaps(r)))
        {
            return Err(invalid(
                "bots.clients",
                format!(
                    "bot {name:?}: {range} is outside access.allow_from, so its clients are refused before a bot is picked"
                ),
            ));
        }
        if bot.socks5_users.is_empty() && bot.client_certs.is_empty() && bot.clients.is_empty() {
            return Err(invalid(
                "bots.name",
                format!(
                    "bot {name:?}: nothing picks it; give it socks5_users, client_certs or clients (the default bot is [bot])"
                ),
            ));
        }
        bots.push(bot);
    }
    let bots = Bots::new(bots, has_default.then_some(0));
    if access.require_client_cert && !bots.lists_certs() {
        return Err(invalid(
            "access.require_client_cert",
            "no bot lists client_certs, so every Gemini request would be refused",
        ));
    }
    Ok(bots)
}

/// One key of a `[[bots]]` entry (a user, certificate or range list): each
/// item parsed, and picking this bot only (an item another bot has is an error,
/// so which bot a client is never depends on the file's order).
fn claim<T: PartialEq>(
    (key, name): (&'static str, &str),
    items: &[String],
    parse: impl Fn(&str) -> Result<T, String>,
    bots: &[Bot],
    claimed: impl Fn(&Bot) -> &Vec<T>,
) -> Result<Vec<T>, ConfigError> {
    let mut out: Vec<T> = Vec::new();
    for text in items {
        let item = parse(text).map_err(|e| invalid(key, format!("bot {name:?}: {e}")))?;
        if let Some(other) = bots.iter().find(|b| claimed(b).contains(&item)) {
            return Err(invalid(
                key,
                format!("{text:?} picks both {:?} and {name:?}", other.name),
            ));
        }
        out.push(item);
    }
    Ok(out)
}

fn bad_name(name: &str) -> String {
    format!(
        "{name:?} is not a bot name (1 to 64 letters, digits, '_', '-' and '.'; not {NO_BOT:?})"
    )
}

/// A profile error inside `[[bots]]`, with the bot's name.
fn in_bot(name: &str, e: ConfigError) -> ConfigError {
    match e {
        ConfigError::Invalid { key, message } => ConfigError::Invalid {
            key,
            message: format!("bot {name:?}: {message}"),
        },
        other => other,
    }
}

/// `[access]`, and the listeners it must cover: a listener reachable from
/// other machines needs `allow_from` to say who may use it.
pub(super) fn access(raw: &RawConfig, listen: &Listens) -> Result<Access, ConfigError> {
    let allow_from = match &raw.access.allow_from {
        None => Access::loopback(),
        Some(items) => items
            .iter()
            .map(|t| Prefix::parse(t).map_err(|e| invalid("access.allow_from", e)))
            .collect::<Result<Vec<_>, _>>()?,
    };
    let access = Access {
        allow_from,
        require_client_cert: raw.access.require_client_cert.unwrap_or(false),
    };
    if access.loopback_only() {
        let crawlers = listen.iter().filter(|(l, _)| l.spec().serves_crawlers);
        for (listener, addr) in crawlers {
            let listener = listener.spec().title;
            if !addr.ip().is_loopback() {
                return Err(invalid(
                    "access.allow_from",
                    format!(
                        "the {listener} listener is on {addr}, reachable from other machines, but access.allow_from admits only this machine; \
                         list the client ranges to serve (allow_from = [\"192.168.1.0/24\"]), or allow_from = [\"0.0.0.0/0\", \"::/0\"] to serve anyone"
                    ),
                ));
            }
        }
    }
    Ok(access)
}

/// The keys of a bot's limits, as an error names them.
struct LimitKeys {
    min_delay: &'static str,
    max_wait: &'static str,
    concurrency: &'static str,
    rate: &'static str,
    daily_requests_per_server: &'static str,
    quiet_hours: &'static str,
    mode: &'static str,
    content_usage: &'static str,
    user_agent: &'static str,
    http_methods: &'static str,
    web_bot_auth: &'static str,
    signature_agent: &'static str,
}

const BOT_KEYS: LimitKeys = LimitKeys {
    min_delay: "bot.min_delay",
    max_wait: "bot.max_wait",
    concurrency: "bot.concurrency",
    rate: "bot.rate",
    daily_requests_per_server: "bot.daily_requests_per_server",
    quiet_hours: "bot.quiet_hours",
    mode: "bot.mode",
    content_usage: "bot.content_usage",
    user_agent: "bot.user_agent",
    http_methods: "bot.http_methods",
    web_bot_auth: "bot.web_bot_auth",
    signature_agent: "bot.signature_agent",
};

const BOTS_KEYS: LimitKeys = LimitKeys {
    min_delay: "bots.min_delay",
    max_wait: "bots.max_wait",
    concurrency: "bots.concurrency",
    rate: "bots.rate",
    daily_requests_per_server: "bots.daily_requests_per_server",
    quiet_hours: "bots.quiet_hours",
    mode: "bots.mode",
    content_usage: "bots.content_usage",
    user_agent: "bots.user_agent",
    http_methods: "bots.http_methods",
    web_bot_auth: "bots.web_bot_auth",
    signature_agent: "bots.signature_agent",
};

/// A bot's limits, each within its bound (`values::bound`).
fn bot_limits(keys: &LimitKeys, raw: &RawBotLimits) -> Result<BotLimits, ConfigError> {
    let min_delay = duration(
        keys.min_delay,
        raw.min_delay,
        std::time::Duration::ZERO,
        bound::DELAY,
    )?;
    let max_wait = raw
        .max_wait
        .map(|text| {
            let written = Some(text);
            duration(
                keys.max_wait,
                written,
                std::time::Duration::ZERO,
                bound::MAX_WAIT,
            )
        })
        .transpose()?;
    let concurrency = raw
        .concurrency
        .map(|n| count(keys.concurrency, Some(n), n, bound::PER_HOST_CONCURRENCY))
        .transpose()?;
    let rate = raw
        .rate
        .map(|r| Rate::parse(r).map_err(|e| invalid(keys.rate, e)))
        .transpose()?;
    let daily_requests_per_server = raw
        .daily_requests_per_server
        .map(|n| {
            count(
                keys.daily_requests_per_server,
                Some(n),
                n,
                bound::DAILY_REQUESTS,
            )
        })
        .transpose()?;
    let quiet_hours = raw.quiet_hours.unwrap_or_default();
    if quiet_hours.len() > bound::QUIET_HOURS {
        return Err(invalid(
            keys.quiet_hours,
            format!(
                "{} windows: at most {}",
                quiet_hours.len(),
                bound::QUIET_HOURS
            ),
        ));
    }
    let quiet_hours = quiet_hours
        .iter()
        .map(|w| DayWindow::parse(w).map_err(|e| invalid(keys.quiet_hours, e)))
        .collect::<Result<Vec<_>, _>>()?;
    if DayWindow::cover_the_day(&quiet_hours) {
        return Err(invalid(
            keys.quiet_hours,
            "the windows cover the whole day, so this bot could never start a request",
        ));
    }
    let mode = raw
        .mode
        .map(|m| Mode::parse(m).map_err(|e| invalid(keys.mode, e)))
        .transpose()?
        .unwrap_or_default();
    Ok(BotLimits {
        min_delay,
        max_wait,
        concurrency,
        rate,
        daily_requests_per_server,
        quiet_hours,
        mode,
        uploads: raw.uploads.unwrap_or(false),
        user_agent: raw
            .user_agent
            .map(|ua| user_agent(ua).map_err(|e| invalid(keys.user_agent, e)))
            .transpose()?,
        http_methods: raw
            .http_methods
            .map(|m| HttpMethods::parse(m).map_err(|e| invalid(keys.http_methods, e)))
            .transpose()?
            .unwrap_or_default(),
        signing: signing(keys, raw)?,
    })
}

/// A bot's Web Bot Auth: `web_bot_auth` other than "off" needs
/// `signature_agent`, the HTTPS origin its key directory is published at.
fn signing(keys: &LimitKeys, raw: &RawBotLimits) -> Result<crate::identity::Signing, ConfigError> {
    use crate::identity::{agent_url, Signing, When};
    let when = raw
        .web_bot_auth
        .map(|w| When::parse(w).map_err(|e| invalid(keys.web_bot_auth, e)))
        .transpose()?
        .unwrap_or_default();
    let agent = raw
        .signature_agent
        .map(|a| agent_url(a).map_err(|e| invalid(keys.signature_agent, e)))
        .transpose()?;
    match (when, agent) {
        (When::Off, _) => Ok(Signing::default()),
        (_, None) => Err(invalid(
            keys.web_bot_auth,
            format!(
                "signing needs {}: the https:// origin where the key directory is published",
                keys.signature_agent
            ),
        )),
        (when, Some(agent)) => Ok(Signing { when, agent }),
    }
}

/// A bot's `user_agent`: one line of printable ASCII, at most 256 bytes
/// (what a `User-Agent` header may hold without surprise).
fn user_agent(ua: &str) -> Result<String, String> {
    if ua.trim().is_empty() {
        return Err("an empty User-Agent; leave it unset to send the product token".into());
    }
    if ua.len() > 256 || !ua.bytes().all(|b| (b' '..=b'~').contains(&b)) {
        return Err("printable ASCII, at most 256 bytes".into());
    }
    Ok(ua.to_string())
}

/// The uses a bot declares (`content_usage`), added to its profile: robots.txt's
/// preferences about them decide its requests too.
fn declared_uses(
    keys: &LimitKeys,
    raw: &RawBotLimits,
    profile: BotProfile,
) -> Result<BotProfile, ConfigError> {
    let uses = raw.content_usage.unwrap_or_default();
    if uses.len() > 8 {
        return Err(invalid(keys.content_usage, "at most 8 uses"));
    }
    uses.iter().try_fold(profile, |p, name| {
        Use::parse(name)
            .map(|u| p.with_use(u))
            .map_err(|e| invalid(keys.content_usage, e))
    })
}
