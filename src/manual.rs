//! The manual pages: clap_mangen's sections from the command line's
//! definitions ([`crate::cli`]), and the sections a manual page has that clap
//! knows nothing of: ENVIRONMENT, FILES, SIGNALS, EXIT STATUS.

use std::io::{self, Write};
use std::path::Path;

use clap::CommandFactory;

use crate::cli::{Cli, BIN};

/// Every page: `robots-proxy` and one per subcommand, by file stem
/// (`robots-proxy-run`), with its command as the page shows it.
pub fn pages() -> Vec<(String, clap::Command)> {
    let mut root = Cli::command().disable_help_subcommand(true);
    root.build();
    let mut pages = vec![(BIN.to_string(), root.clone())];
    for sub in root.get_subcommands() {
        let name = sub.get_name();
        let page = sub
            .clone()
            .display_name(format!("{BIN}-{name}"))
            .bin_name(format!("{BIN} {name}"));
        pages.push((format!("{BIN}-{name}"), page));
    }
    pages
}

/// One page as roff: clap's sections, then ours.
pub fn render(stem: &str, command: &clap::Command, out: &mut dyn Write) -> io::Result<()> {
    clap_mangen::Man::new(command.clone()).render(out)?;
    out.write_all(sections(stem).as_bytes())
}

/// Every page into `dir`, as `STEM.1`.
pub fn write_all(dir: &Path) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for (stem, command) in pages() {
        let mut page = Vec::new();
        render(&stem, &command, &mut page)?;
        std::fs::write(dir.join(format!("{stem}.1")), page)?;
    }
    Ok(())
}

const ENVIRONMENT: &str = r#".SH ENVIRONMENT
.TP
\fBRUST_LOG\fR
A log filter (\fBinfo\fR, \fBrobots_proxy=debug\fR) that overrides \fBlog.level\fR. Empty means unset; one that does not parse is logged as a warning and the configured level is used.
.TP
\fBXDG_STATE_HOME\fR, \fBHOME\fR
Where the state directory is when neither \fB\-\-state\-dir\fR nor \fBstate_dir\fR names one: \fI$XDG_STATE_HOME/robots\-proxy\fR, else \fI$HOME/.local/state/robots\-proxy\fR. With neither set, \fBrun\fR refuses to start.
"#;

const FILES: &str = r#".SH FILES
.TP
\fI/etc/robots\-proxy/robots\-proxy.toml\fR
The configuration file the packaged unit and image read (\fB\-\-config\fR). Without one the proxy runs on embedded defaults.
.TP
\fISTATE_DIR/gemini\-cert.pem\fR, \fIgemini\-key.pem\fR, \fIgemini\-cert.names\fR
The Gemini listener's certificate, made on first start for \fBtls.hostnames\fR (unless \fBtls.cert\fR and \fBtls.key\fR name others), and the names it was made for. Crawlers pin it: keep it.
.TP
\fISTATE_DIR/ca\-cert.pem\fR, \fIca\-key.pem\fR, \fIdropin/\fR
The drop\-in CA the SOCKS5 and transparent listeners end a crawler's TLS with, and the leaves it issued. A crawler behind them trusts \fIca\-cert.pem\fR.
.TP
\fISTATE_DIR/pins\fR
The certificate each capsule showed first (trust on first use). A capsule that shows another is refused until its pin is forgotten (the status page, or \fBPOST /api/pins/forget\fR).
.TP
\fISTATE_DIR/budgets\fR
Bots' daily request budgets used so far, kept across restarts.
.TP
\fISTATE_DIR/web\-bot\-auth/BOT.key.pem\fR
The Ed25519 key a bot with \fBweb_bot_auth\fR signs its web requests with (PKCS#8 PEM, owner\-only), made on first start or brought by the operator. Its public half is what \fBlisten.key_directory\fR serves: keep it, or publish the new one.
.TP
\fISTATE_DIR/listening\fR
Where each listener is bound (\fBlisten.metrics 127.0.0.1:9770\fR, a line each), written at every start, for what runs beside the proxy without knowing its flags: the container image's HEALTHCHECK reads the admin listener's address here.
"#;

const SIGNALS: &str = r#".SH SIGNALS
.TP
\fBSIGHUP\fR
Reload: the configuration is read again and applied to new connections; connections, caches, pins and budgets are kept. A file that does not validate is refused (logged), and the running configuration stays.
.TP
\fBSIGTERM\fR, \fBSIGINT\fR
Stop: no new connections; requests in flight get \fBlimits.shutdown_grace\fR to finish.
"#;

/// The sections `stem`'s page adds to clap's.
fn sections(stem: &str) -> String {
    let sub = stem
        .strip_prefix(BIN)
        .unwrap_or(stem)
        .trim_start_matches('-');
    let exit = match sub {
        "" => EXIT_ALL,
        "run" => EXIT_RUN,
        "check" => EXIT_CHECK,
        "transparent-rules" => EXIT_RULES,
        _ => EXIT_PRINT,
    };
    let mut out = String::new();
    if matches!(sub, "" | "run" | "check" | "transparent-rules") {
        out.push_str(ENVIRONMENT);
    }
    if matches!(sub, "" | "run") {
        out.push_str(FILES);
        out.push_str(SIGNALS);
    }
    out.push_str(".SH \"EXIT STATUS\"\n");
    out.push_str(exit);
    out
}

const EXIT_RUN: &str = r#".TP
\fB0\fR
Stopped by SIGTERM or SIGINT (or \fB\-\-check\-config\fR found nothing wrong).
.TP
\fB1\fR
The runtime could not start.
.TP
\fB2\fR
The configuration, a file it names, the state directory or a listener's address is wrong; the message names the key or flag to change.
"#;

const EXIT_CHECK: &str = r#".TP
\fB0\fR
Every target was decided.
.TP
\fB1\fR
A target could not be parsed (it gets an \fBerror\fR line).
.TP
\fB2\fR
Bad flags, or a robots.txt or targets file that cannot be read.
"#;

const EXIT_RULES: &str = r#".TP
\fB0\fR
The rules were printed.
.TP
\fB2\fR
The configuration is wrong, the rules would loop, or the transparent listener is off.
"#;

const EXIT_PRINT: &str = r#".TP
\fB0\fR
Printed (a reader that stops early is no error).
.TP
\fB1\fR
Writing failed.
.TP
\fB2\fR
Bad arguments.
"#;

const EXIT_ALL: &str = r#"Each subcommand's page gives its own. In short: \fB0\fR success; \fB1\fR \fBcheck\fR met a target it could not parse, or a write failed; \fB2\fR a usage or configuration error, named in the message.
"#;
