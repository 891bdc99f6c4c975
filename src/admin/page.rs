//! The status page: server-rendered HTML from the same JSON as `/api/…`,
//! pictures drawn as inline SVG (`charts`), no external assets (it works
//! offline). A little inline script sorts the hosts table by a column,
//! filters it as one types, and every few seconds fetches the page again and
//! swaps in the parts marked `data-live` (not the form one is typing in).
//! Without script everything is there: the filter form asks the server, and
//! the status page reloads itself now and then.

use super::charts;
use super::html::{esc, seconds};
use super::model::{
    Bot, Explained, Followed, HostEntry, HostPage, HostRow, PerBot, Spacing, Status, Store,
};

/// How often the page's live parts are fetched again, in seconds.
pub const REFRESH_SECONDS: u32 = 5;

/// Seconds as people read them, or a dash.
fn human(v: Option<f64>) -> String {
    v.map_or_else(|| "–".into(), seconds)
}

/// A number for a sortable cell's `data-v`, or nothing.
fn sort_value(v: Option<f64>) -> String {
    v.map_or_else(String::new, |v| v.to_string())
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}h4{margin:.5em 0 .2em;font-size:1em;color:#444}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f0f0f0;cursor:pointer}td.n{text-align:right}\
.found{color:#070}.report{background:#fff0d0;color:#850;padding:0 .3em;border-radius:.2em;font-size:.9em}.up{color:#070}.missing{color:#555}.unreachable,.store-down{color:#b00}.stale{color:#a60}\
pre{margin:0}.line{display:block}.applies{background:#fff3b0}.ln{color:#888;display:inline-block;width:3em}\
.allow{color:#070;font-weight:bold}.disallow{color:#b00;font-weight:bold}\
form{margin:.5em 0}input[type=text]{width:32em}small{color:#666}\
tr.delay{background:#dff0ff}.svgs svg.chart{max-width:100%;height:auto;display:block}\
text.axis{font:11px system-ui,sans-serif;fill:#555}.legend span{margin-right:1em}\
.legend i{display:inline-block;width:.8em;height:.8em;margin-right:.3em;vertical-align:-.05em}\
p.said{margin:.2em 0 1em}.bot{display:inline-block;vertical-align:top;margin-right:2em}";

/// Sorting by a column (delegated, so it survives a refresh), filtering as
/// one types, and the refresh of the `data-live` parts.
const SCRIPT: &str = "const sortBy=(t,i,d)=>{const b=t.tBodies[0],r=[...b.rows];r.sort((x,y)=>{\
const p=x.cells[i].dataset.v??x.cells[i].textContent,q=y.cells[i].dataset.v??y.cells[i].textContent;\
const m=parseFloat(p),n=parseFloat(q),c=isNaN(m)||isNaN(n)?p.localeCompare(q):m-n;return d==='a'?c:-c});r.forEach(x=>b.appendChild(x))};\
let sorted=null;document.addEventListener('click',e=>{const th=e.target.closest('table.sortable th');if(!th)return;\
const t=th.closest('table'),d=th.dataset.dir=th.dataset.dir==='a'?'d':'a';sorted=[t.id,th.cellIndex,d];sortBy(t,th.cellIndex,d)});\
const f=document.getElementById('filter');\
const filter=()=>{if(f)for(const r of document.querySelectorAll('#hosts tbody tr'))r.hidden=!r.dataset.host.includes(f.value)};\
if(f)f.oninput=filter;\
const live=async()=>{if(document.hidden)return;try{const r=await fetch(location.href);if(!r.ok)return;\
const d=new DOMParser().parseFromString(await r.text(),'text/html');\
for(const n of document.querySelectorAll('[data-live]')){const m=d.getElementById(n.id);if(m)n.replaceWith(m)}\
if(sorted){const t=document.getElementById(sorted[0]);if(t){t.tHead.rows[0].cells[sorted[1]].dataset.dir=sorted[2];sortBy(t,sorted[1],sorted[2])}}\
filter();const h=document.documentElement;h.dataset.refreshed=+(h.dataset.refreshed||0)+1}catch(e){}};";

/// A page: `reload` makes it reload itself when scripts are off (the
/// status page; not a page with a form whose answer is on it).
fn page(title: &str, body: &str, reload: bool) -> String {
    let noscript = match reload {
        true => format!(
            "<noscript><meta http-equiv=\"refresh\" content=\"{}\"></noscript>",
            REFRESH_SECONDS * 6
        ),
        false => String::new(),
    };
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <meta name=\"viewport\" content=\"width=device-width\">{noscript}<style>{STYLE}</style></head>\
         <body>{body}<script>{SCRIPT}setInterval(live,{}*1000);</script></body></html>",
        esc(title),
        REFRESH_SECONDS
    )
}

/// `/`: the proxy at a glance, its bots with their limits and pictures, the
/// fleet store, the latest refusals, and the hosts it saw lately.
pub fn status(s: &Status, filter: &str) -> String {
    let mut b = String::new();
    b.push_str(&format!(
        "<h1>robots-proxy {}</h1><p id=\"summary\" data-live>up {} · config generation {} · {} certificate pins{} · <a href=\"/metrics\">metrics</a> · <a href=\"/api/status\">JSON</a></p>",
        esc(&s.version),
        seconds(s.uptime_seconds as f64),
        s.config_generation,
        s.pins,
        match &s.store {
            Some(st) if st.up => " · fleet store <span class=\"up\">up</span>".to_string(),
            Some(_) => " · fleet store <span class=\"store-down\">down</span>".to_string(),
            None => String::new(),
        }
    ));
    b.push_str("<h2>Requests</h2><table id=\"counts\" data-live><tr>");
    for (k, v) in &s.requests {
        b.push_str(&format!("<th>{}</th><td class=\"n\">{v}</td>", esc(k)));
    }
    b.push_str("</tr></table>");
    b.push_str(&bots_table(&s.bots));
    b.push_str(&bot_pictures(&s.bots));
    if let Some(store) = &s.store {
        b.push_str(&store_section(store));
    }
    b.push_str(&refusals_table(s));
    b.push_str("<h2>Listeners</h2><table id=\"listeners\">");
    for (name, addr) in &s.listeners {
        b.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(name),
            esc(addr)
        ));
    }
    b.push_str("</table><h2>Hosts seen lately</h2>");
    b.push_str(&format!(
        "<form method=\"get\" action=\"/\"><input type=\"text\" id=\"filter\" name=\"filter\" value=\"{}\" placeholder=\"filter by host\"> <button>filter</button> <small>click a column to sort; the spacing is each bot's in force, and where it comes from</small></form>",
        esc(filter)
    ));
    b.push_str("<table id=\"hosts\" class=\"sortable\" data-live><thead><tr><th>host</th><th>robots.txt</th><th>age</th>");
    for bot in &s.bots {
        b.push_str(&format!(
            "<th>spacing for {}{}</th>",
            esc(&bot.name),
            match bot.reports() {
                true => " <span class=\"report\">report</span>",
                false => "",
            }
        ));
    }
    b.push_str("<th>queue</th><th>next start in</th><th>requests</th><th>refusals</th><th>errors by cause</th><th title=\"pages crawlers did not get: their turn past their wait, a limit, their client left, a place in line never come back for\">lost</th><th>last refusal</th></tr></thead><tbody>");
    for h in &s.hosts {
        b.push_str(&host_tr(h, &s.bots));
    }
    b.push_str("</tbody></table>");
    page("robots-proxy status", &b, true)
}

/// One row of the hosts table.
fn host_tr(h: &HostRow, bots: &[Bot]) -> String {
    let hostport = super::status::host_port(&h.host, h.port);
    let state = &h.robots.state;
    let mut b = format!(
        "<tr data-host=\"{}\"><td><a href=\"/host/{}\">{}</a></td><td class=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>",
        esc(&h.key),
        esc(&hostport),
        esc(&h.key),
        esc(state),
        esc(state),
        sort_value(h.robots.age_seconds),
        human(h.robots.age_seconds),
    );
    for bot in bots {
        match h.spacing.as_ref().and_then(|sp| sp.get(&bot.name)) {
            Some(sp) => b.push_str(&format!(
                "<td class=\"n\" data-v=\"{}\">{} <small>{}</small></td>",
                sp.seconds,
                seconds(sp.seconds),
                spacing_from(sp)
            )),
            None => b.push_str("<td class=\"n\">–</td>"),
        }
    }
    let last = match &h.last_refusal {
        None => "–".to_string(),
        Some(last) => format!(
            "{} {} ago: {}",
            esc(&last.outcome),
            seconds(last.seconds_ago),
            esc(&last.detail)
        ),
    };
    b.push_str(&format!(
        "<td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        h.queue,
        sort_value(h.next_start_in_seconds),
        human(h.next_start_in_seconds),
        h.requests,
        h.refusals,
        errors(h),
        lost(h),
        last
    ));
    b
}

/// The bots: their token, mode, limits and what is left of each.
fn bots_table(bots: &[Bot]) -> String {
    let mut b = String::from("<h2>Bots</h2><table id=\"bots\" data-live><thead><tr><th>name</th><th>product token</th><th>virtual agents</th><th>mode</th><th>declared uses</th><th>limits (what is left now)</th></tr></thead><tbody>");
    for bot in bots {
        let mode = match bot.reports() {
            true => "<span class=\"report\">report</span> <small>relayed at once; what would be refused or held is only counted</small>",
            false => "enforce",
        };
        let uses = match bot.content_usage.is_empty() {
            true => "–".to_string(),
            false => esc(&bot.content_usage.join(", ")),
        };
        b.push_str(&format!(
            "<tr data-bot=\"{}\"><td>{}</td><td>{}</td><td>{}</td><td>{mode}</td><td>{uses}</td><td>{}</td></tr>",
            esc(&bot.name),
            esc(&bot.name),
            esc(&bot.agent),
            esc(&bot.virtual_agents.join(", ")),
            limits_cell(bot)
        ));
    }
    b.push_str("</tbody></table>");
    b
}

/// A bot's limits, each with what is left of it now (this proxy's count).
fn limits_cell(bot: &Bot) -> String {
    let (l, left) = (&bot.limits, &bot.left);
    let mut parts: Vec<String> = Vec::new();
    if let Some(d) = l.min_delay_seconds {
        parts.push(format!("min_delay {}", seconds(d)));
    }
    if let Some(d) = l.max_wait_seconds {
        parts.push(format!("max_wait {}", seconds(d)));
    }
    if let Some(max) = l.concurrency {
        let free = left.concurrency.unwrap_or(max);
        parts.push(format!(
            "concurrency {max} <small>({free} free at its busiest server)</small>"
        ));
    }
    if let Some(rate) = &l.rate {
        parts.push(format!(
            "rate {} <small>({} left in the window)</small>",
            esc(rate),
            left.rate.map_or_else(|| "–".into(), |n| n.to_string())
        ));
    }
    if let Some(per) = l.daily_requests_per_server {
        let least = left.daily_requests_per_server.unwrap_or(per);
        parts.push(format!(
            "daily_requests_per_server {per} <small>(at least {least} left at each server{})</small>",
            match bot.reports() {
                true => "; not enforced",
                false => "",
            }
        ));
    }
    if !l.quiet_hours.is_empty() {
        let now = match left.quiet_for_seconds {
            Some(q) if q > 0.0 => format!("quiet now, for {}", seconds(q)),
            _ => "not quiet now".into(),
        };
        parts.push(format!(
            "quiet_hours {} UTC <small>({now})</small>",
            esc(&l.quiet_hours.join(", "))
        ));
    }
    match parts.is_empty() {
        true => "none".into(),
        false => parts.join("<br>"),
    }
}

/// Fleet mode's store: its health and shape.
fn store_section(st: &Store) -> String {
    let health = match st.up {
        true => "<span class=\"up\">up</span>".to_string(),
        false => "<span class=\"store-down\">down</span>".to_string(),
    };
    let masters: Vec<String> = st.masters.iter().map(|m| esc(&m.addr)).collect();
    format!(
        "<h2>Fleet store</h2><table id=\"store\" data-live><tr><th>health</th><td>{health}</td></tr>\
         <tr><th>kind</th><td>{}</td></tr><tr><th>URL</th><td>{}</td></tr>\
         <tr><th>masters</th><td>{}</td></tr><tr><th>restarts and failovers seen</th><td class=\"n\">{}</td></tr>\
         <tr><th>last found broken</th><td>{}</td></tr><tr><th>when it is down</th><td>on_unavailable = \"{}\"</td></tr></table>",
        esc(&st.kind),
        esc(&st.url),
        match masters.is_empty() {
            true => "none seen".into(),
            false => masters.join(", "),
        },
        st.restarts_and_failovers,
        st.broken_seconds_ago
            .map_or_else(|| "never".into(), |s| format!("{} ago", seconds(s))),
        esc(&st.on_unavailable)
    )
}

/// The latest refusals, newest first, with the rule that refused each.
fn refusals_table(s: &Status) -> String {
    let mut b = String::from("<h2>Latest refusals</h2><table id=\"refusals\" data-live><thead><tr><th>when</th><th>server</th><th>outcome</th><th>rule</th></tr></thead><tbody>");
    if s.recent_refusals.is_empty() {
        b.push_str("<tr><td colspan=\"4\">none lately</td></tr>");
    }
    for r in &s.recent_refusals {
        b.push_str(&format!(
            "<tr><td>{} ago</td><td><a href=\"/host/{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            seconds(r.refusal.seconds_ago),
            esc(&r.host_port),
            esc(&r.key),
            esc(&r.refusal.outcome),
            esc(&r.refusal.detail)
        ));
    }
    b.push_str("</tbody></table>");
    b
}

/// Each bot's requests per minute and, when it has a daily budget, the
/// servers it used it at.
fn bot_pictures(bots: &[Bot]) -> String {
    let mut b = String::from("<div id=\"pictures\" class=\"svgs\" data-live>");
    for (i, bot) in bots.iter().enumerate() {
        b.push_str(&format!(
            "<div class=\"bot\"><h3>{}{}</h3>{}",
            esc(&bot.name),
            match bot.reports() {
                true => " <span class=\"report\">report mode</span>",
                false => "",
            },
            charts::per_minute(&bot.per_minute, &bot.name, &i.to_string())
        ));
        if let Some(budgets) = &bot.budgets {
            b.push_str(&charts::budgets(budgets, &i.to_string(), 10));
        }
        b.push_str("</div>");
    }
    b.push_str("</div>");
    b
}

/// Where a spacing comes from, short: the setting, or the robots.txt line.
fn spacing_from(sp: &Spacing) -> String {
    match sp.line {
        Some(line) => format!("Crawl-delay, line {line}"),
        None => esc(&sp.from),
    }
}

/// Errors by outcome: `upstream 2 · client-left 1`.
fn errors(h: &HostRow) -> String {
    counts(h.errors.iter().map(|(outcome, e)| (outcome, e.count)))
}

/// Pages lost by why: `wait 3 · client-left 1 · given-up 1`.
fn lost(h: &HostRow) -> String {
    counts(h.lost.iter().map(|(why, n)| (why, *n)))
}

/// Counts by name, `name n · name n`, or `–` for none.
fn counts<'a>(named: impl Iterator<Item = (&'a String, u64)>) -> String {
    let parts: Vec<String> = named
        .map(|(name, n)| format!("{} {n}", esc(name)))
        .collect();
    match parts.is_empty() {
        true => "–".into(),
        false => parts.join(" · "),
    }
}

/// `/host/HOST:PORT`: each cached robots.txt with the lines each bot
/// follows marked, the forget actions, and the explain box.
pub fn host(h: &HostPage, explained: Option<&Explained>, hostport: &str) -> String {
    let mut b = format!(
        "<p><a href=\"/\">← status</a></p><h1>{}</h1>",
        esc(hostport)
    );
    // The example URL is one the proxy serves at this host: its own scheme.
    let scheme = h
        .entries
        .first()
        .map_or("gemini", |e| e.summary.scheme.as_str());
    b.push_str(&format!(
        "<form method=\"get\" action=\"/host/{0}\"><input type=\"text\" name=\"explain\" placeholder=\"{2}://{0}/some/page\" value=\"{1}\"> <button>explain</button></form>",
        esc(hostport),
        esc(explained.map_or("", |e| e.url.as_str())),
        esc(scheme)
    ));
    if let Some(e) = explained {
        b.push_str("<table id=\"explain\"><thead><tr><th>bot</th><th>verdict</th><th>why</th></tr></thead><tbody>");
        if let Some(err) = &e.error {
            b.push_str(&format!("<tr><td colspan=\"3\">{}</td></tr>", esc(err)));
        }
        for v in &e.bots {
            b.push_str(&format!(
                "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                esc(&v.bot),
                esc(&v.decision),
                esc(&v.decision),
                esc(&v.explanation)
            ));
        }
        b.push_str("</tbody></table>");
    }
    if h.entries.is_empty() {
        b.push_str("<p>The proxy has not seen this host lately.</p>");
    }
    if h.fleet && !h.entries.is_empty() {
        b.push_str("<p id=\"fleet\"><small>Fleet mode: the starts and the queue shown are this proxy's. The other proxies of the fleet take their turns at this host through the store, and each shows its own.</small></p>");
    }
    for e in &h.entries {
        let sum = &e.summary;
        let state = &sum.robots.state;
        b.push_str(&format!(
            "<h2>{}</h2><p>robots.txt: <span class=\"{}\">{}</span>, fetched {} ago, fresh for {} more{}</p>",
            esc(&sum.key),
            esc(state),
            esc(state),
            human(sum.robots.age_seconds),
            human(sum.robots.fresh_for_seconds),
            sum.robots
                .detail
                .as_deref()
                .map(|d| format!(" ({})", esc(d)))
                .unwrap_or_default()
        ));
        b.push_str(&host_pictures(h, e));
        if let Some(lines) = &e.robots_txt {
            b.push_str(&robots_table(e, lines));
        }
    }
    let (host, port) = hostport.rsplit_once(':').unwrap_or((hostport, ""));
    b.push_str(&format!(
        "<h2>Actions</h2><form method=\"post\" action=\"/api/robots/forget\"><input type=\"hidden\" name=\"host\" value=\"{0}\"><input type=\"hidden\" name=\"port\" value=\"{1}\"><input type=\"password\" name=\"token\" placeholder=\"admin token, if set\"> <button>forget the cached robots.txt</button></form>\
         <form method=\"post\" action=\"/api/pins/forget\"><input type=\"hidden\" name=\"host\" value=\"{0}\"><input type=\"hidden\" name=\"port\" value=\"{1}\"><input type=\"password\" name=\"token\" placeholder=\"admin token, if set\"> <button>forget the certificate pin</button></form>",
        esc(host),
        esc(port)
    ));
    page(&format!("robots-proxy: {hostport}"), &b, false)
}

/// A cached robots.txt, a row per line, with a column per bot marking the
/// lines it follows and the Crawl-delay its spacing comes from.
fn robots_table(e: &HostEntry, lines: &[String]) -> String {
    let mut b = String::from("<table class=\"robots\"><thead><tr><th>line</th>");
    for bot in &e.bots {
        b.push_str(&format!(
            "<th>{} <small>({})</small></th>",
            esc(&bot.bot),
            esc(&bot.groups)
        ));
    }
    b.push_str("<th>text</th></tr></thead><tbody>");
    for (i, line) in lines.iter().enumerate() {
        let n = u32::try_from(i + 1).unwrap_or(u32::MAX);
        let applies = e.bots.iter().any(|bot| bot.follows(n));
        let delay = e.bots.iter().any(|bot| bot.crawl_delay_line == Some(n));
        let class = match (applies, delay) {
            (true, true) => " class=\"applies delay\"",
            (true, false) => " class=\"applies\"",
            (false, true) => " class=\"delay\"",
            (false, false) => "",
        };
        b.push_str(&format!("<tr{class}><td class=\"n\">{n}</td>"));
        for bot in &e.bots {
            b.push_str(&line_mark(bot, e.summary.spacing.as_ref(), n));
        }
        b.push_str(&format!("<td><pre>{}</pre></td></tr>", esc(line)));
    }
    b.push_str("</tbody></table>");
    b
}

/// A bot's cell on robots.txt line `n`: ✓ when the line is one of the
/// groups and rules it follows; "spacing" on the Crawl-delay line its
/// spacing comes from, or what overrides it.
fn line_mark(bot: &Followed, spacing: Option<&PerBot<Spacing>>, n: u32) -> String {
    if bot.crawl_delay_line == Some(n) {
        if let Some(sp) = spacing.and_then(|s| s.get(&bot.bot)) {
            return match sp.line == Some(n) {
                true => format!(
                    "<td class=\"spacing\" title=\"the Crawl-delay this bot is spaced by\">spacing {}</td>",
                    seconds(sp.seconds)
                ),
                false => format!(
                    "<td class=\"spacing\">asked; {} {} in force</td>",
                    esc(&sp.from),
                    seconds(sp.seconds)
                ),
            };
        }
    }
    match bot.follows(n) {
        true => "<td>✓</td>".into(),
        false => "<td></td>".into(),
    }
}

/// What made a server slow down, in its protocol's words.
fn slowed_by(scheme: &str) -> &'static str {
    match scheme {
        "http" | "https" => "HTTP 429 or 503 with Retry-After",
        "gemini" => "Gemini 44",
        _ => "its answers",
    }
}

/// A server's pictures on its host page, fetched again as the page
/// refreshes: the spacing in force per bot and where it comes from, its
/// starts against that spacing, its queue, its errors by cause.
fn host_pictures(h: &HostPage, e: &HostEntry) -> String {
    let sum = &e.summary;
    let id = sum.scheme.as_str();
    let mut b = format!("<div id=\"live-{}\" class=\"svgs\" data-live>", esc(id));
    let spacing: Vec<String> = h
        .bots
        .iter()
        .filter_map(|bot| {
            let sp = sum.spacing.as_ref()?.get(bot)?;
            let from = match sp.line {
                Some(line) => format!("robots.txt Crawl-delay, line {line}"),
                None => esc(&sp.from),
            };
            Some(format!(
                "<b style=\"color:{}\">{}</b> {} <small>({from})</small>",
                charts::bot_colour(&h.bots, bot),
                esc(bot),
                seconds(sp.seconds)
            ))
        })
        .collect();
    if !spacing.is_empty() {
        b.push_str(&format!(
            "<p class=\"spacing\">Spacing in force (each start waits its bot's after the last start by any bot): {}",
            spacing.join(" · ")
        ));
        if sum.slow_down_factor > 1 {
            b.push_str(&format!(
                "; slowed down ×{} after the server asked ({})",
                sum.slow_down_factor,
                slowed_by(id)
            ));
        }
        b.push_str("</p>");
    }
    b.push_str(&format!(
        "<h3>Starts</h3>{}<h3>Queue</h3>{}",
        charts::starts(&e.timeline, &h.bots, id),
        charts::queue(&e.timeline, id)
    ));
    b.push_str(&format!(
        "<h3>Errors by cause</h3><table id=\"errors-{}\"><thead><tr><th>outcome</th><th>cause</th><th>requests</th></tr></thead><tbody>",
        esc(id)
    ));
    if sum.errors.is_empty() {
        b.push_str("<tr><td colspan=\"3\">none</td></tr>");
    }
    for (outcome, v) in &sum.errors {
        b.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(outcome),
            esc(&v.cause),
            v.count
        ));
    }
    b.push_str("</tbody></table></div>");
    b
}
