//! The status page: server-rendered HTML from the same JSON as `/api/…`, no
//! external assets (it works offline). A little inline script sorts the hosts
//! table by a column and filters it as one types; without script, the filter
//! form asks the server.

use serde_json::Value;

/// Text made safe for HTML.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

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
    let Some(s) = v.as_f64() else {
        return "–".into();
    };
    match s {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

const STYLE: &str = "body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222}\
h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.5em}\
table{border-collapse:collapse;margin:.5em 0}th,td{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top}\
th{background:#f0f0f0;cursor:pointer}td.n{text-align:right}\
.found{color:#070}.missing{color:#555}.unreachable,.store-down{color:#b00}.stale{color:#a60}\
pre{margin:0}.line{display:block}.applies{background:#fff3b0}.ln{color:#888;display:inline-block;width:3em}\
.allow{color:#070;font-weight:bold}.disallow{color:#b00;font-weight:bold}\
form{margin:.5em 0}input[type=text]{width:32em}small{color:#666}";

const SCRIPT: &str = "document.querySelectorAll('table.sortable th').forEach((th,i)=>th.onclick=()=>{\
const t=th.closest('table'),b=t.tBodies[0],r=[...b.rows],d=th.dataset.dir=th.dataset.dir==='a'?'d':'a';\
r.sort((x,y)=>{const p=x.cells[i].dataset.v??x.cells[i].textContent,q=y.cells[i].dataset.v??y.cells[i].textContent;\
const m=parseFloat(p),n=parseFloat(q),c=isNaN(m)||isNaN(n)?p.localeCompare(q):m-n;return d==='a'?c:-c});r.forEach(x=>b.appendChild(x))});\
const f=document.getElementById('filter');if(f)f.oninput=()=>{for(const r of document.querySelectorAll('#hosts tbody tr'))\
r.hidden=!r.dataset.host.includes(f.value)};";

fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\
         <meta name=\"viewport\" content=\"width=device-width\"><style>{STYLE}</style></head>\
         <body>{body}<script>{SCRIPT}</script></body></html>",
        esc(title)
    )
}

/// `/`: the proxy at a glance and the hosts it saw lately.
pub fn status(s: &Value, filter: &str) -> String {
    let mut b = String::new();
    b.push_str(&format!(
        "<h1>robots-proxy {}</h1><p>up {} · config generation {} · {} certificate pins · <a href=\"/metrics\">metrics</a> · <a href=\"/api/status\">JSON</a></p>",
        show(&s["version"]),
        human(&s["uptime_seconds"]),
        show(&s["config_generation"]),
        show(&s["pins"]),
    ));
    b.push_str("<h2>Requests</h2><table id=\"counts\"><tr>");
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
    b.push_str("</tbody></table><h2>Listeners</h2><table id=\"listeners\">");
    for (name, addr) in s["listeners"].as_object().into_iter().flatten() {
        b.push_str(&format!(
            "<tr><th>{}</th><td>{}</td></tr>",
            esc(name),
            show(addr)
        ));
    }
    b.push_str("</table><h2>Hosts seen lately</h2>");
    b.push_str(&format!(
        "<form method=\"get\" action=\"/\"><input type=\"text\" id=\"filter\" name=\"filter\" value=\"{}\" placeholder=\"filter by host\"> <button>filter</button> <small>click a column to sort</small></form>",
        esc(filter)
    ));
    let bots: Vec<String> = s["bots"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|b| b["name"].as_str().map(String::from))
        .collect();
    b.push_str("<table id=\"hosts\" class=\"sortable\"><thead><tr><th>host</th><th>robots.txt</th><th>age</th>");
    for bot in &bots {
        b.push_str(&format!("<th>Crawl-delay {}</th>", esc(bot)));
    }
    b.push_str("<th>queue</th><th>next start in</th><th>requests</th><th>refusals</th><th>last refusal</th></tr></thead><tbody>");
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
            b.push_str(&format!(
                "<td class=\"n\">{}</td>",
                human(&h["crawl_delay"][bot])
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
            "<td class=\"n\">{}</td><td class=\"n\" data-v=\"{}\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td></tr>",
            show(&h["queue"]),
            show(&h["next_start_in_seconds"]),
            human(&h["next_start_in_seconds"]),
            show(&h["requests"]),
            show(&h["refusals"]),
            last
        ));
    }
    b.push_str("</tbody></table>");
    page("robots-proxy status", &b)
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
                let marks: Vec<bool> = bots
                    .iter()
                    .map(|bot| {
                        bot["lines"]
                            .as_array()
                            .is_some_and(|ls| ls.iter().any(|l| l.as_u64() == Some(n)))
                    })
                    .collect();
                let class = if marks.iter().any(|m| *m) {
                    " class=\"applies\""
                } else {
                    ""
                };
                b.push_str(&format!("<tr{class}><td class=\"n\">{n}</td>"));
                for m in marks {
                    b.push_str(if m { "<td>✓</td>" } else { "<td></td>" });
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
    page(&format!("robots-proxy: {hostport}"), &b)
}
