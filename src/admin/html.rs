//! Text made safe for the admin pages' HTML and SVG, shared by the page
//! (`page.rs`) and its pictures (`charts.rs`): robots.txt lines, URLs and
//! bot names come from outside.

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
