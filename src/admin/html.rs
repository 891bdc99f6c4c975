//! Text for the admin pages' HTML and SVG, shared by the page (`page.rs`)
//! and its pictures (`charts.rs`): escaping for what came from outside
//! (robots.txt lines, URLs, bot names), and seconds as people read them.

/// Text made safe for HTML (and for an attribute in double or single quotes).
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

/// Seconds as people read them: `250 ms`, `4.5 s`, `12 min`, `3.5 h`.
pub fn seconds(s: f64) -> String {
    match s {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{s:.1} s"),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.1} h", s / 3600.0),
    }
}

/// Seconds in whole units, for a picture's axis: `37 s`, `12 min`, `3 h`.
pub fn whole_seconds(s: f64) -> String {
    match s {
        s if s < 1.0 => format!("{:.0} ms", s * 1000.0),
        s if s < 120.0 => format!("{:.0} s", s),
        s if s < 7200.0 => format!("{:.0} min", s / 60.0),
        s => format!("{:.0} h", s / 3600.0),
    }
}
