//! The status page: server-rendered HTML from the same JSON as `/api/…`,
//! pictures drawn as inline SVG (`charts`), no external assets (it works
//! offline). A little inline script sorts the hosts table by a column,
//! filters it as one types, and every few seconds fetches the page again and
//! swaps in the parts marked `data-live` (not the form one is typing in).
//! Without script everything is there: the filter form asks the server, and
//! the status page reloads itself now and then.

use serde_json::Value;

use super::charts;
use super::html::{esc, seconds};

/// How often the page's live parts are fetched again, in seconds.
pub const REFRESH_SECONDS: u32 = 5;

/// A JSON value as table text.
fn show(v: &Value) -> String {
    match v {
        Value::Null => "–".into(),
        Value::String(s) => esc(s),
        Value::Number(n) => n.to_string(),
        Value::Bool(b) => b.to_string(),
        other => esc(&other.to_string()),
    }
}

/// Seconds as people read them.
fn human(v: &Value) -> String {
    v.as_f64().map_or_else(|| "–".into(), seconds)
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}h4{margin:.5em 0 .2em;font-size:1em;color:#444}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f0f0f0;cursor:pointer}td.n{text-align:right}\
.found{color:#070}.missing{color:#555}.unreachable,.store-down{color:#b00}.stale{color:#a60}\
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

/// `/`: the proxy at a glance, its bots' pictures, and the hosts it saw
/// lately.
pub fn status(s: &Value, filter: &str) -> String {
    let mut b = String::new();
    b.push_str(&format!(
        "<h1>robots-proxy {}</h1><p id=\"summary\" data-live>up {} · config generation {} · {} certificate pins · <a href=\"/metrics\">metrics</a> · <a href=\"/api/status\">JSON</a></p>",
        show(&s["version"]),
        human(&s["uptime_seconds"]),
        show(&s["config_generation"]),
        show(&s["pins"]),
    ));
    b.push_str("<h2>Requests</h2><table id=\"counts\" data-live><tr>");
    if let Some(counts) = s["requests"].as_object() {
        for (k, v) in counts {
            b.push_str(&format!(
                "<th>{}</th><td class=\"n\">{}</td>",
                esc(k),
                show(v)
            ));
        }
    }
    b.push_str("</tr></table><h2>Bots</h2><table id=\"bots\"><thead><tr><th>name</th><th>product token</th><th>virtual agents</th></tr></thead><tbody>");
    for bot in s["bots"].as_array().into_iter().flatten() {
        let va: Vec<String> = bot["virtual_agents"]
            .as_array()
            .into_iter()
            .flatten()
            .map(show)
            .collect();
        b.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td>{}</td></tr>",
            show(&bot["name"]),
            show(&bot["agent"]),
            va.join(", ")
        ));
    }
    b.push_str("</tbody></table>");
    b.push_str(&bot_pictures(s));
    b.push_str("<h2>Listeners</h2><table id=\"listeners\">");
    for (name, addr) in s["listeners"].as_object().into_iter().flatten() {
        b.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(name),
            show(addr)
        ));
    }
    b.push_str("</table><h2>Hosts seen lately</h2>");
    b.push_str(&format!(
        "<form method=\"get\" action=\"/\"><input type=\"text\" id=\"filter\" name=\"filter\" value=\"{}\" placeholder=\"filter by host\"> <button>filter</button> <small>click a column to sort; the spacing is each bot's in force, and where it comes from</small></form>",
        esc(filter)
    ));
    let bots = bot_names(s);
    b.push_str("<table id=\"hosts\" class=\"sortable\" data-live><thead><tr><th>host</th><th>robots.txt</th><th>age</th>");
    for bot in &bots {
        b.push_str(&format!("<th>spacing for {}</th>", esc(bot)));
    }
    b.push_str("<th>queue</th><th>next start in</th><th>requests</th><th>refusals</th><th>errors by cause</th><th>last refusal</th></tr></thead><tbody>");
    for h in s["hosts"].as_array().into_iter().flatten() {
        let key = h["key"].as_str().unwrap_or("");
        let hostport = format!(
            "{}:{}",
            h["host"].as_str().unwrap_or(""),
            h["port"].as_u64().unwrap_or(0)
        );
        let state = h["robots"]["state"].as_str().unwrap_or("");
        b.push_str(&format!(
            "<tr data-host=\"{}\"><td><a href=\"/host/{}\">{}</a></td><td class=\"{}\">{}</td><td class=\"n\" data-v=\"{}\">{}</td>",
            esc(key),
            esc(&hostport),
            esc(key),
            esc(state),
            esc(state),
            show(&h["robots"]["age_seconds"]),
            human(&h["robots"]["age_seconds"]),
        ));
        for bot in &bots {
            let sp = &h["spacing"][bot];
            b.push_str(&format!(
                "<td class=\"n\" data-v=\"{}\">{} <small>{}</small></td>",
                show(&sp["seconds"]),
                human(&sp["seconds"]),
                spacing_from(sp)
            ));
        }
        let last = &h["last_refusal"];
        let last = match last.is_null() {
            true => "–".to_string(),
            false => format!(
                "{} {} ago: {}",
                show(&last["outcome"]),
                human(&last["seconds_ago"]),
                show(&last["detail"])
            ),
        };
        b.push_str(&format!(
            "<td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td></tr>",
            show(&h["queue"]),
            show(&h["next_start_in_seconds"]),
            human(&h["next_start_in_seconds"]),
            show(&h["requests"]),
            show(&h["refusals"]),
            errors(&h["errors"]),
            last
        ));
    }
    b.push_str("</tbody></table>");
    page("robots-proxy status", &b, true)
}

/// The bots' names, in the configuration's order (their colours).
fn bot_names(s: &Value) -> Vec<String> {
    s["bots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["name"].as_str().map(String::from))
        .collect()
}

/// Each bot's requests per minute and, when it has a daily budget, the
/// servers it used it at.
fn bot_pictures(s: &Value) -> String {
    let mut b = String::from("<div id=\"pictures\" class=\"svgs\" data-live>");
    for (i, bot) in s["bots"].as_array().into_iter().flatten().enumerate() {
        let name = bot["name"].as_str().unwrap_or("");
        b.push_str(&format!(
            "<div class=\"bot\"><h3>{}</h3>{}",
            esc(name),
            charts::per_minute(&bot["per_minute"], name, &i.to_string())
        ));
        if !bot["budgets"].is_null() {
            b.push_str(&charts::budgets(&bot["budgets"], &i.to_string(), 10));
        }
        b.push_str("</div>");
    }
    b.push_str("</div>");
    b
}

/// Where a spacing comes from, short: the setting, or the robots.txt line.
fn spacing_from(sp: &Value) -> String {
    match (sp["from"].as_str(), sp["line"].as_u64()) {
        (_, Some(line)) => format!("Crawl-delay, line {line}"),
        (Some(from), None) => esc(from),
        (None, None) => String::new(),
    }
}

/// Errors by outcome: `upstream 2 · client-left 1`.
fn errors(e: &Value) -> String {
    let parts: Vec<String> = e
        .as_object()
        .into_iter()
        .flatten()
        .map(|(outcome, v)| format!("{} {}", esc(outcome), show(&v["count"])))
        .collect();
    match parts.is_empty() {
        true => "–".into(),
        false => parts.join(" · "),
    }
}

/// `/host/HOST:PORT`: each cached robots.txt with the lines each bot
/// follows marked, the forget actions, and the explain box.
pub fn host(h: &Value, explained: Option<&Value>, hostport: &str) -> String {
    let mut b = format!(
        "<p><a href=\"/\">← status</a></p><h1>{}</h1>",
        esc(hostport)
    );
    b.push_str(&format!(
        "<form method=\"get\" action=\"/host/{0}\"><input type=\"text\" name=\"explain\" placeholder=\"gemini://{0}/some/page.gmi\" value=\"{1}\"> <button>explain</button></form>",
        esc(hostport),
        esc(explained.and_then(|e| e["url"].as_str()).unwrap_or(""))
    ));
    if let Some(e) = explained {
        b.push_str("<table id=\"explain\"><thead><tr><th>bot</th><th>verdict</th><th>why</th></tr></thead><tbody>");
        if let Some(err) = e["error"].as_str() {
            b.push_str(&format!("<tr><td colspan=\"3\">{}</td></tr>", esc(err)));
        }
        for v in e["bots"].as_array().into_iter().flatten() {
            let d = v["decision"].as_str().unwrap_or("");
            b.push_str(&format!(
                "<tr><td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                show(&v["bot"]),
                esc(d),
                esc(d),
                show(&v["explanation"])
            ));
        }
        b.push_str("</tbody></table>");
    }
    let entries = h["entries"].as_array().cloned().unwrap_or_default();
    if entries.is_empty() {
        b.push_str("<p>The proxy has not seen this host lately.</p>");
    }
    for e in &entries {
        let sum = &e["summary"];
        let state = sum["robots"]["state"].as_str().unwrap_or("");
        b.push_str(&format!(
            "<h2>{}</h2><p>robots.txt: <span class=\"{}\">{}</span>, fetched {} ago, fresh for {} more{}</p>",
            show(&sum["key"]),
            esc(state),
            esc(state),
            human(&sum["robots"]["age_seconds"]),
            human(&sum["robots"]["fresh_for_seconds"]),
            sum["robots"]["detail"]
                .as_str()
                .map(|d| format!(" ({})", esc(d)))
                .unwrap_or_default()
        ));
        b.push_str(&host_pictures(h, e));
        let bots = e["bots"].as_array().cloned().unwrap_or_default();
        if let Some(lines) = e["robots_txt"].as_array() {
            b.push_str("<table class=\"robots\"><thead><tr><th>line</th>");
            for bot in &bots {
                b.push_str(&format!(
                    "<th>{} <small>({})</small></th>",
                    show(&bot["bot"]),
                    show(&bot["groups"])
                ));
            }
            b.push_str("<th>text</th></tr></thead><tbody>");
            for (i, line) in lines.iter().enumerate() {
                let n = i as u64 + 1;
                let marks: Vec<String> = bots
                    .iter()
                    .map(|bot| line_mark(bot, &sum["spacing"], n))
                    .collect();
                let applies = bots.iter().any(|bot| {
                    bot["lines"]
                        .as_array()
                        .is_some_and(|ls| ls.iter().any(|l| l.as_u64() == Some(n)))
                });
                let delay = bots
                    .iter()
                    .any(|bot| bot["crawl_delay_line"].as_u64() == Some(n));
                let class = match (applies, delay) {
                    (true, true) => " class=\"applies delay\"",
                    (true, false) => " class=\"applies\"",
                    (false, true) => " class=\"delay\"",
                    (false, false) => "",
                };
                b.push_str(&format!("<tr{class}><td class=\"n\">{n}</td>"));
                for m in marks {
                    b.push_str(&m);
                }
                b.push_str(&format!("<td><pre>{}</pre></td></tr>", show(line)));
            }
            b.push_str("</tbody></table>");
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

/// A bot's cell on robots.txt line `n`: ✓ when the line is one of the
/// groups and rules it follows; "spacing" on the Crawl-delay line its
/// spacing comes from, or what overrides it.
fn line_mark(bot: &Value, spacing: &Value, n: u64) -> String {
    let follows = bot["lines"]
        .as_array()
        .is_some_and(|ls| ls.iter().any(|l| l.as_u64() == Some(n)));
    if bot["crawl_delay_line"].as_u64() == Some(n) {
        let sp = &spacing[bot["bot"].as_str().unwrap_or("")];
        return match sp["line"].as_u64() == Some(n) {
            true => format!(
                "<td class=\"spacing\" title=\"the Crawl-delay this bot is spaced by\">spacing {}</td>",
                human(&sp["seconds"])
            ),
            false => format!(
                "<td class=\"spacing\">asked; {} {} in force</td>",
                esc(sp["from"].as_str().unwrap_or("")),
                human(&sp["seconds"])
            ),
        };
    }
    match follows {
        true => "<td>✓</td>".into(),
        false => "<td></td>".into(),
    }
}

/// A server's pictures on its host page, fetched again as the page
/// refreshes: the spacing in force per bot and where it comes from, its
/// starts against that spacing, its queue, its errors by cause.
fn host_pictures(h: &Value, e: &Value) -> String {
    let sum = &e["summary"];
    let id = sum["key"]
        .as_str()
        .and_then(|k| k.split_once("://"))
        .map_or("server", |(scheme, _)| scheme);
    let bots: Vec<String> = h["bots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b.as_str().map(String::from))
        .collect();
    let mut b = format!("<div id=\"live-{}\" class=\"svgs\" data-live>", esc(id));
    let spacing: Vec<String> = bots
        .iter()
        .filter(|bot| !sum["spacing"][bot.as_str()].is_null())
        .map(|bot| {
            let sp = &sum["spacing"][bot.as_str()];
            let from = match sp["line"].as_u64() {
                Some(line) => format!("robots.txt Crawl-delay, line {line}"),
                None => esc(sp["from"].as_str().unwrap_or("")),
            };
            format!(
                "<b style=\"color:{}\">{}</b> {} <small>({from})</small>",
                charts::bot_colour(&bots, bot),
                esc(bot),
                human(&sp["seconds"])
            )
        })
        .collect();
    if !spacing.is_empty() {
        b.push_str(&format!(
            "<p class=\"spacing\">Spacing in force (each start waits its bot's after the last start by any bot): {}",
            spacing.join(" · ")
        ));
        if sum["slow_down_factor"].as_u64().is_some_and(|f| f > 1) {
            b.push_str(&format!(
                "; slowed down ×{} after the server asked (Gemini 44)",
                show(&sum["slow_down_factor"])
            ));
        }
        b.push_str("</p>");
    }
    b.push_str(&format!(
        "<h3>Starts</h3>{}<h3>Queue</h3>{}",
        charts::starts(&e["timeline"], &bots, id),
        charts::queue(&e["timeline"], id)
    ));
    b.push_str(&format!(
        "<h3>Errors by cause</h3><table id=\"errors-{}\"><thead><tr><th>outcome</th><th>cause</th><th>requests</th></tr></thead><tbody>",
        esc(id)
    ));
    let errors = sum["errors"].as_object().cloned().unwrap_or_default();
    if errors.is_empty() {
        b.push_str("<tr><td colspan=\"3\">none</td></tr>");
    }
    for (outcome, v) in &errors {
        b.push_str(&format!(
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(outcome),
            show(&v["cause"]),
            show(&v["count"])
        ));
    }
    b.push_str("</tbody></table></div>");
    b
}
