//! The status page's pictures, drawn by the proxy as inline SVG from the
//! same JSON as `/api/…` (nothing fetched, nothing to run): a server's starts
//! against their spacing and its queue length, a bot's requests per minute
//! by decision, its daily budgets. Each picture has a `<title>` and a sentence
//! under it saying what it shows, for those who cannot see it.

use std::fmt::Write;

use super::html::{esc, seconds, whole_seconds};
use super::model::{Budgets, Minute, Timeline};

/// Drawing width, in SVG units (the picture scales to the page).
const W: f64 = 760.0;
/// Room left of the plot for the y labels.
const LEFT: f64 = 44.0;
const RIGHT: f64 = 12.0;

/// Bot colours, by the bot's place in the configuration.
const PALETTE: [&str; 8] = [
    "#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22",
];

/// The colour of a decision (`allowed`, `disallowed`, `slowed`, `error`).
fn decision_colour(decision: &str) -> &'static str {
    match decision {
        "allowed" => "#3a3",
        "disallowed" => "#c33",
        "slowed" => "#e90",
        _ => "#888",
    }
}

/// The colour of `bot`, by its place in `bots`.
pub fn bot_colour(bots: &[String], bot: &str) -> &'static str {
    let i = bots.iter().position(|b| b == bot).unwrap_or(bots.len());
    PALETTE[i % PALETTE.len()]
}

/// `1 server`, `2 servers`.
fn plural(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// The stretch of time a plot shows, in seconds before now: `from` at its
/// left edge, `to` at its right (0: now).
#[derive(Clone, Copy)]
struct Span {
    from: f64,
    to: f64,
}

impl Span {
    /// The last `window` seconds.
    fn last(window: f64) -> Span {
        Span {
            from: window.max(1.0),
            to: 0.0,
        }
    }

    /// Where `seconds_ago` falls on the plot.
    fn x(self, seconds_ago: f64) -> f64 {
        let plot = W - LEFT - RIGHT;
        let frac = (self.from - seconds_ago) / (self.from - self.to).max(1e-3);
        LEFT + plot * frac.clamp(0.0, 1.0)
    }

    /// The time axis under a plot: its ends and middle, as time before now.
    fn axis(self, svg: &mut String, y: f64) {
        let _ = write!(
            svg,
            "<line x1=\"{LEFT}\" y1=\"{y}\" x2=\"{}\" y2=\"{y}\" stroke=\"#999\"/>",
            W - RIGHT
        );
        let mid = (self.from + self.to) / 2.0;
        for (ago, anchor) in [(self.from, "start"), (mid, "middle"), (self.to, "end")] {
            let label = match ago < 0.0005 {
                true => "now".to_string(),
                false => format!("−{}", whole_seconds(ago)),
            };
            let _ = write!(
                svg,
                "<text x=\"{:.1}\" y=\"{}\" text-anchor=\"{anchor}\" class=\"axis\">{label}</text>",
                self.x(ago),
                y + 14.0
            );
        }
    }
}

fn svg_open(id: &str, h: f64, title: &str) -> String {
    format!(
        "<svg id=\"{}\" class=\"chart\" viewBox=\"0 0 {W} {h}\" width=\"{W}\" height=\"{h}\" role=\"img\" aria-label=\"{1}\" xmlns=\"http://www.w3.org/2000/svg\"><title>{1}</title>",
        esc(id),
        esc(title)
    )
}

/// A legend: a coloured square and a name each.
fn legend(items: &[(&str, String)]) -> String {
    let mut out = String::from("<p class=\"legend\">");
    for (colour, name) in items {
        let _ = write!(
            out,
            "<span><i style=\"background:{colour}\"></i>{}</span> ",
            esc(name)
        );
    }
    out.push_str("</p>");
    out
}

/// A server's recent starts (`timeline.starts`), each a tick in its bot's
/// colour, and before each the spacing it had to keep after the start
/// before it, shaded: a tick inside a shade would be a start too soon.
/// What it says of the spacing counts only enforced starts: a bot in report
/// mode is not held (its ticks are dashed). `id` names the picture (one per
/// scheme on a host page).
pub fn starts(timeline: &Timeline, bots: &[String], id: &str) -> String {
    let starts = &timeline.starts;
    let (h, top, bottom) = (96.0, 8.0, 64.0);
    // From the first start remembered to the last, and a spacing's room on
    // either side: a burst long ago is as readable as one now.
    let pad = starts.iter().map(|s| s.spacing_seconds).fold(0.0, f64::max);
    let span = match (starts.first(), starts.last()) {
        (Some(first), Some(last)) => {
            let (from, to) = (first.seconds_ago, last.seconds_ago);
            let pad = pad.max((from - to) * 0.05).max(0.05);
            Span {
                from: from + pad,
                to: (to - pad).max(0.0),
            }
        }
        _ => Span::last(timeline.window_seconds),
    };
    let title = format!("Request starts in the last {}", whole_seconds(span.from));
    let mut svg = svg_open(&format!("starts-{id}"), h, &title);
    for s in starts {
        if let Some(gap) = s.gap_seconds {
            // The spacing this start had to keep after the one before it.
            let before = s.seconds_ago + gap;
            let (x0, x1) = (span.x(before), span.x(before - s.spacing_seconds));
            if x1 > x0 {
                let _ = write!(
                    svg,
                    "<rect class=\"spacing\" x=\"{x0:.1}\" y=\"{top}\" width=\"{:.1}\" height=\"{}\" fill=\"#dde6f3\"/>",
                    x1 - x0,
                    bottom - top
                );
            }
        }
    }
    let mut early = 0;
    let mut reported = 0;
    let mut enforced = 0;
    let mut closest: Option<(f64, f64)> = None;
    for s in starts {
        match s.reported {
            true => reported += 1,
            false => {
                enforced += 1;
                if s.early {
                    early += 1;
                }
                if let Some(g) = s.gap_seconds {
                    if closest.is_none_or(|(cg, cs)| g - s.spacing_seconds < cg - cs) {
                        closest = Some((g, s.spacing_seconds));
                    }
                }
            }
        }
        let x = span.x(s.seconds_ago);
        let colour = match s.early && !s.reported {
            true => "#d00",
            false => bot_colour(bots, &s.bot),
        };
        let dash = match s.reported {
            true => " stroke-dasharray=\"3 2\"",
            false => "",
        };
        let after = match s.gap_seconds {
            Some(g) => format!(", {} after the start before it", seconds(g)),
            None => String::new(),
        };
        let _ = write!(
            svg,
            "<line class=\"start\" data-bot=\"{}\" data-early=\"{}\" data-reported=\"{}\" x1=\"{x:.1}\" y1=\"{top}\" x2=\"{x:.1}\" y2=\"{bottom}\" stroke=\"{colour}\" stroke-width=\"2\"{dash}><title>{} started {} ago{after} (its spacing {})</title></line>",
            esc(&s.bot),
            s.early,
            s.reported,
            esc(&s.bot),
            seconds(s.seconds_ago),
            seconds(s.spacing_seconds)
        );
    }
    span.axis(&mut svg, bottom + 4.0);
    svg.push_str("</svg>");
    let mut said = match (enforced, closest) {
        (0, _) if reported == 0 => "No request started here lately.".to_string(),
        (0, _) => "No enforced start here lately.".to_string(),
        (n, None) => format!("{} here lately.", plural(n, "enforced start")),
        (n, Some((gap, spacing))) => format!(
            "{n} enforced starts; the closest two were {} apart, against a spacing of {}.",
            seconds(gap),
            seconds(spacing)
        ),
    };
    match early {
        0 if enforced > 1 => said.push_str(" The spacing held."),
        0 => {}
        n => {
            let _ = write!(said, " <b>{n} started sooner than their spacing.</b>");
        }
    }
    if reported > 0 {
        let _ = write!(
            said,
            " {} of a bot in report mode were not held (dashed), and are not counted here.",
            plural(reported, "start")
        );
    }
    let mut in_it: Vec<&str> = Vec::new();
    for s in starts {
        if !in_it.contains(&s.bot.as_str()) {
            in_it.push(&s.bot);
        }
    }
    let mut items: Vec<(&str, String)> = in_it
        .iter()
        .map(|b| (bot_colour(bots, b), b.to_string()))
        .collect();
    items.push(("#dde6f3", "spacing kept after a start".into()));
    format!(
        "{svg}{}<p class=\"said\" id=\"starts-{}-said\">{said}</p>",
        legend(&items),
        esc(id)
    )
}

/// A server's queue length over the last `window_seconds`: a step line.
pub fn queue(timeline: &Timeline, id: &str) -> String {
    let window = timeline.window_seconds.max(1.0);
    let span = Span::last(window);
    let points = &timeline.queue;
    let (h, top, bottom) = (84.0, 8.0, 56.0);
    let most = points
        .iter()
        .map(|p| f64::from(p.waiting))
        .fold(0.0, f64::max);
    let scale = most.max(1.0);
    let y_at = |n: f64| bottom - (bottom - top) * n / scale;
    let title = format!("Requests waiting in the last {}", whole_seconds(window));
    let mut svg = svg_open(&format!("queue-{id}"), h, &title);
    let mut path = String::new();
    for p in points {
        let x = span.x(p.seconds_ago);
        let y = y_at(f64::from(p.waiting));
        match path.is_empty() {
            true => {
                let _ = write!(path, "M{x:.1},{y:.1}");
            }
            false => {
                let _ = write!(path, " H{x:.1} V{y:.1}");
            }
        }
    }
    if !path.is_empty() {
        let _ = write!(path, " H{:.1}", W - RIGHT);
        let _ = write!(
            svg,
            "<path class=\"queue\" d=\"{path}\" fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"1.5\"/>"
        );
    }
    for (n, label) in [(0.0, "0".to_string()), (scale, format!("{scale:.0}"))] {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"axis\">{label}</text>",
            LEFT - 4.0,
            y_at(n) + 4.0
        );
    }
    span.axis(&mut svg, bottom + 4.0);
    svg.push_str("</svg>");
    let now = points.last().map_or(0, |p| p.waiting);
    format!(
        "{svg}<p class=\"said\" id=\"queue-{}-said\">{now} waiting now; at most {most:.0} in the last {}.</p>",
        esc(id),
        whole_seconds(window)
    )
}

/// A bot's requests per minute over the last hour (`per_minute`), a bar per
/// minute stacked by decision.
pub fn per_minute(rows: &[Minute], bot: &str, id: &str) -> String {
    const DECISIONS: [&str; 4] = ["allowed", "disallowed", "slowed", "error"];
    let (h, top, bottom) = (110.0, 8.0, 80.0);
    let total = |r: &Minute| {
        r.by_decision()
            .iter()
            .map(|(_, n)| f64::from(*n))
            .sum::<f64>()
    };
    let most = rows.iter().map(total).fold(0.0, f64::max).max(1.0);
    let span = Span::last(3600.0);
    let bar = (W - LEFT - RIGHT) / 60.0;
    let title = format!("Requests per minute by {bot}, the last hour");
    let mut svg = svg_open(&format!("minutes-{id}"), h, &title);
    let mut sums = [0.0; 4];
    for r in rows {
        let ago = r.minutes_ago as f64;
        let x = span.x((ago + 1.0) * 60.0);
        let mut y = bottom;
        for (i, (d, n)) in r.by_decision().into_iter().enumerate() {
            let n = f64::from(n);
            sums[i] += n;
            if n == 0.0 {
                continue;
            }
            let hgt = (bottom - top) * n / most;
            y -= hgt;
            let _ = write!(
                svg,
                "<rect class=\"minute {d}\" data-n=\"{n}\" x=\"{x:.1}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{hgt:.1}\" fill=\"{}\"><title>{ago:.0} min ago: {n} {d}</title></rect>",
                (bar - 1.0).max(1.0),
                decision_colour(d)
            );
        }
    }
    for (n, label) in [(0.0, "0".to_string()), (most, format!("{most:.0}"))] {
        let _ = write!(
            svg,
            "<text x=\"{}\" y=\"{:.1}\" text-anchor=\"end\" class=\"axis\">{label}</text>",
            LEFT - 4.0,
            bottom - (bottom - top) * n / most + 4.0
        );
    }
    span.axis(&mut svg, bottom + 4.0);
    svg.push_str("</svg>");
    let items: Vec<(&str, String)> = DECISIONS
        .iter()
        .zip(sums)
        .map(|(d, n)| (decision_colour(d), format!("{d} {n:.0}")))
        .collect();
    // The scale's top is at least 1; what is said is what was counted.
    let peak = rows.iter().map(total).fold(0.0, f64::max);
    format!(
        "<h4>Requests per minute</h4>{svg}{}<p class=\"said\" id=\"minutes-{}-said\">{:.0} requests in the last hour, at most {peak:.0} in a minute.</p>",
        legend(&items),
        esc(id),
        sums.iter().sum::<f64>()
    )
}

/// A bot's daily budget per server (`budgets`): a bar each, the part used
/// filled; the most used first, at most `rows`.
pub fn budgets(b: &Budgets, id: &str, rows: usize) -> String {
    let limit = f64::from(b.per_server).max(1.0);
    let mut servers: Vec<_> = b.servers.iter().collect();
    servers.sort_by_key(|s| std::cmp::Reverse(s.used));
    servers.truncate(rows);
    let row_h = 18.0;
    let h = 8.0 + row_h * servers.len().max(1) as f64;
    let label_w = 260.0;
    let plot = W - label_w - 90.0;
    let title = format!("Daily budget used per server, of {limit:.0}");
    let mut svg = svg_open(&format!("budgets-{id}"), h, &title);
    for (i, s) in servers.iter().enumerate() {
        let y = 4.0 + row_h * i as f64;
        let used = f64::from(s.used);
        let part = (used / limit).clamp(0.0, 1.0);
        // Spent is red only where it is enforced: a bot in report mode was
        // not refused, and its bar says "would have been".
        let colour = match (part >= 1.0, b.enforced) {
            (true, true) => "#c33",
            (true, false) => "#e90",
            (false, _) => "#3a3",
        };
        let _ = write!(
            svg,
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\" class=\"axis\">{}</text>\
             <rect x=\"{label_w}\" y=\"{y:.1}\" width=\"{plot:.1}\" height=\"{:.1}\" fill=\"#eee\"/>\
             <rect class=\"budget\" data-used=\"{used}\" x=\"{label_w}\" y=\"{y:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{colour}\"><title>{}: {used:.0} of {limit:.0}</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\" class=\"axis\">{used:.0} / {limit:.0}</text>",
            label_w - 6.0,
            y + 12.0,
            esc(&s.server),
            row_h - 4.0,
            plot * part,
            row_h - 4.0,
            esc(&s.server),
            label_w + plot + 6.0,
            y + 12.0
        );
    }
    svg.push_str("</svg>");
    let spent = servers
        .iter()
        .filter(|s| f64::from(s.used) >= limit)
        .count();
    let (title, spent) = match b.enforced {
        true => ("Daily budget per server", format!("{spent} of them spent")),
        false => (
            "Daily budget per server (report mode: not enforced)",
            format!("{spent} of them would have been spent, had it been enforced"),
        ),
    };
    format!(
        "<h4>{title}</h4>{svg}<p class=\"said\" id=\"budgets-{}-said\">{} used in the last 24 hours; {spent}.</p>",
        esc(id),
        plural(servers.len(), "server")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::admin::model::{BudgetRow, QueuePoint, StartMark};

    fn bots() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    fn start(ago: f64, bot: &str, spacing: f64, gap: Option<f64>, reported: bool) -> StartMark {
        StartMark {
            seconds_ago: ago,
            bot: bot.into(),
            spacing_seconds: spacing,
            gap_seconds: gap,
            early: gap.is_some_and(|g| g < spacing),
            reported,
        }
    }

    fn timeline(starts: Vec<StartMark>) -> Timeline {
        Timeline {
            window_seconds: 60.0,
            starts,
            queue: Vec::new(),
        }
    }

    #[test]
    fn a_start_sooner_than_its_spacing_is_red_and_said() {
        let t = timeline(vec![
            start(30.0, "a", 5.0, None, false),
            start(24.0, "b", 5.0, Some(6.0), false),
            start(22.0, "a", 5.0, Some(2.0), false),
        ]);
        let svg = starts(&t, &bots(), "x");
        assert_eq!(svg.matches("class=\"start\"").count(), 3);
        assert_eq!(svg.matches("stroke=\"#d00\"").count(), 1, "{svg}");
        assert_eq!(svg.matches("class=\"spacing\"").count(), 2);
        assert!(
            svg.contains("<b>1 started sooner than their spacing.</b>"),
            "{svg}"
        );
        assert!(svg.contains("the closest two were 2.0 s apart, against a spacing of 5.0 s"));
    }

    #[test]
    fn spaced_starts_say_the_spacing_held() {
        let t = timeline(vec![
            start(10.0, "a", 1.0, None, false),
            start(9.0, "a", 1.0, Some(1.0), false),
        ]);
        let svg = starts(&t, &bots(), "x");
        assert!(svg.contains("The spacing held."), "{svg}");
        assert!(!svg.contains("#d00"));
    }

    /// Starts of a bot in report mode are not held: they say nothing of
    /// whether the spacing held, however many there are.
    #[test]
    fn reported_starts_do_not_count_for_the_spacing() {
        let t = timeline(vec![
            start(10.0, "a", 5.0, None, true),
            start(9.0, "a", 5.0, Some(1.0), true),
            start(8.0, "a", 5.0, Some(1.0), true),
        ]);
        let svg = starts(&t, &bots(), "x");
        assert!(!svg.contains("The spacing held."), "{svg}");
        assert!(!svg.contains("#d00"), "reported starts are not red: {svg}");
        assert!(svg.contains("No enforced start here lately."), "{svg}");
        assert!(svg.contains("3 starts of a bot in report mode were not held"));
        // One enforced start among reported ones: nothing to say of spacing.
        let t = timeline(vec![
            start(10.0, "b", 5.0, None, false),
            start(9.0, "a", 5.0, Some(1.0), true),
        ]);
        let svg = starts(&t, &bots(), "x");
        assert!(!svg.contains("The spacing held."), "{svg}");
        assert!(svg.contains("1 enforced start here lately."), "{svg}");
    }

    #[test]
    fn axis_labels_are_whole_units() {
        let t = timeline(vec![
            start(37.3, "a", 1.0, None, false),
            start(3.1, "a", 1.0, Some(34.2), false),
        ]);
        let svg = starts(&t, &bots(), "x");
        let labels: Vec<&str> = svg
            .split("class=\"axis\">")
            .skip(1)
            .map(|s| s.split('<').next().unwrap())
            .collect();
        assert_eq!(labels.len(), 3, "{svg}");
        for l in labels {
            assert!(!l.contains('.'), "{l} is not in whole units");
        }
    }

    fn budget(enforced: bool) -> Budgets {
        Budgets {
            per_server: 2,
            enforced,
            servers: vec![BudgetRow {
                server: "gemini://<img>:1965".into(),
                used: 3,
                left: 0,
            }],
        }
    }

    #[test]
    fn hostile_names_are_escaped_in_pictures() {
        let t = timeline(vec![start(1.0, "<script>x</script>", 1.0, None, false)]);
        assert!(!starts(&t, &bots(), "x").contains("<script>"));
        let svg = budgets(&budget(true), "x", 10);
        assert!(!svg.contains("<img>"));
        assert!(svg.contains("1 server used in the last 24 hours; 1 of them spent."));
    }

    /// A bot in report mode was never refused: its spent budget is not
    /// red, and the text says it would have been.
    #[test]
    fn a_report_mode_budget_is_not_shown_as_spent() {
        let svg = budgets(&budget(false), "x", 10);
        assert!(!svg.contains("#c33"), "{svg}");
        assert!(svg.contains("(report mode: not enforced)"));
        assert!(svg.contains("1 of them would have been spent, had it been enforced."));
    }

    #[test]
    fn minutes_stack_by_decision() {
        let rows = [Minute {
            minutes_ago: 0,
            allowed: 3,
            disallowed: 1,
            slowed: 0,
            error: 0,
        }];
        let svg = per_minute(&rows, "a", "0");
        assert_eq!(svg.matches("class=\"minute ").count(), 2);
        assert!(svg.contains("4 requests in the last hour, at most 4 in a minute."));
    }

    #[test]
    fn no_requests_say_none_at_most() {
        let svg = per_minute(&[], "a", "0");
        assert!(
            svg.contains("0 requests in the last hour, at most 0 in a minute."),
            "{svg}"
        );
    }

    #[test]
    fn the_queue_is_a_step_line_with_its_most() {
        let point = |ago, waiting| QueuePoint {
            seconds_ago: ago,
            waiting,
        };
        let t = Timeline {
            window_seconds: 60.0,
            starts: Vec::new(),
            queue: vec![point(50.0, 0), point(40.0, 4), point(5.0, 1)],
        };
        let svg = queue(&t, "x");
        assert!(svg.contains("class=\"queue\""));
        assert!(
            svg.contains("1 waiting now; at most 4 in the last 60 s."),
            "{svg}"
        );
    }
}
