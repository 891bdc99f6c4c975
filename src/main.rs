use std::io::{self, IsTerminal};
use std::process::ExitCode;

use clap::Parser;
use robots_proxy::check;
use robots_proxy::cli::{Cli, Command, ManArgs, RulesArgs, RulesSyntax, RunArgs, StatusArgs};
use robots_proxy::config::{Config, LogFormat};
use robots_proxy::listener::Listener;
use robots_proxy::server::Proxy;
use robots_proxy::transparent::rules::{Plan, Ports, Syntax};

fn main() -> ExitCode {
    // A supervisor may send SIGHUP (reload) a moment after starting `run`,
    // before tokio's handler is in place, and SIGHUP's default action is to
    // end the process. So it is blocked first, before any thread exists
    // (threads inherit the mask), and let through on the main thread once the
    // handler is installed (`run`); one that came meanwhile is then delivered
    // as a reload. Other commands let it through at once.
    #[cfg(unix)]
    let _ = hangup_set().thread_block();
    let cli = Cli::parse();
    #[cfg(unix)]
    if !matches!(cli.command, Command::Run(_)) {
        let _ = hangup_set().thread_unblock();
    }
    match cli.command {
        Command::Check(args) => {
            let stdin = io::stdin();
            let stdout = io::stdout();
            match check::run(&args, &mut stdin.lock(), &mut stdout.lock()) {
                Ok(outcome) => outcome.exit_code(),
                Err(e) => {
                    eprintln!("robots-proxy check: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Run(args) => run(args),
        Command::TransparentRules(args) => transparent_rules(args),
        Command::Completions(args) => {
            // Written whole, then copied out: a reader that stops early
            // (`| head`) is not an error worth a panic.
            let script = robots_proxy::cli::completion_script(args.shell);
            match io::Write::write_all(&mut io::stdout(), &script) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    eprintln!("robots-proxy completions: {e}");
                    ExitCode::from(1)
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Command::Man(args) => man(args),
        Command::Status(args) => status(args),
    }
}

/// `robots-proxy status`: a running proxy's view, from its admin listener.
fn status(args: StatusArgs) -> ExitCode {
    use robots_proxy::admin::terminal;
    let addr = match args.admin {
        Some(addr) => addr,
        None => {
            let run = RunArgs {
                config: args.config.clone(),
                state_dir: args.state_dir.clone(),
                ..RunArgs::default()
            };
            let config = match Config::load(&run) {
                Ok(c) => c,
                Err(e) => {
                    eprintln!("robots-proxy status: {e}");
                    return ExitCode::from(2);
                }
            };
            match terminal::admin_address(&config.state_dir) {
                Ok(addr) => addr,
                Err(e) => {
                    eprintln!("robots-proxy status: {e}");
                    return ExitCode::FAILURE;
                }
            }
        }
    };
    let token = args.token.clone().or_else(|| {
        std::env::var(terminal::TOKEN_VARIABLE)
            .ok()
            .filter(|t| !t.is_empty())
    });
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("robots-proxy status: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(terminal::fetch(addr, token.as_deref())) {
        Ok(s) => {
            let text = match args.json {
                true => serde_json::to_string_pretty(&s).unwrap_or_default() + "\n",
                false => terminal::render(&s),
            };
            match io::Write::write_all(&mut io::stdout(), text.as_bytes()) {
                Err(e) if e.kind() != io::ErrorKind::BrokenPipe => {
                    eprintln!("robots-proxy status: {e}");
                    ExitCode::FAILURE
                }
                _ => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("robots-proxy status: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `robots-proxy man`: the manual pages ([`robots_proxy::manual`]).
fn man(args: ManArgs) -> ExitCode {
    use robots_proxy::manual;
    let written = match (&args.out_dir, &args.subcommand) {
        (Some(dir), _) => manual::write_all(dir),
        (None, name) => {
            let stem = match name {
                Some(name) => format!("robots-proxy-{name}"),
                None => "robots-proxy".to_string(),
            };
            let pages = manual::pages();
            let Some((stem, page)) = pages.iter().find(|(s, _)| *s == stem) else {
                let names: Vec<_> = pages.iter().skip(1).map(|(_, c)| c.get_name()).collect();
                eprintln!(
                    "robots-proxy man: no subcommand {:?} (one of: {})",
                    name.as_deref().unwrap_or_default(),
                    names.join(", ")
                );
                return ExitCode::from(2);
            };
            let mut text = Vec::new();
            manual::render(stem, page, &mut text)
                .and_then(|()| io::Write::write_all(&mut io::stdout(), &text))
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        // `robots-proxy man | head` is not an error.
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("robots-proxy man: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `robots-proxy transparent-rules`: the firewall rules for this config.
fn transparent_rules(args: RulesArgs) -> ExitCode {
    let fail = |e: &dyn std::fmt::Display| {
        eprintln!("robots-proxy transparent-rules: {e}");
        ExitCode::from(2)
    };
    let config = match Config::load(&args.run) {
        Ok(c) => c,
        Err(e) => return fail(&e),
    };
    let syntax = match args.syntax {
        RulesSyntax::Iptables => Syntax::Iptables,
        RulesSyntax::Nft => Syntax::Nftables,
    };
    let ports = match &args.ports {
        Some(list) => Ports::parse(list),
        None => Ok(Ports::These(config.ports.all())),
    };
    let rules = ports
        .and_then(|ports| Plan::for_config(&config, args.crawler_user.clone(), ports))
        .and_then(|plan| plan.render(syntax));
    match rules {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}

fn run(args: RunArgs) -> ExitCode {
    let config = match Config::load(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("robots-proxy run: {e}");
            return ExitCode::from(2);
        }
    };
    if args.check_config {
        if let Err(e) = robots_proxy::preflight::check(&config) {
            eprintln!("robots-proxy run: {e}");
            return ExitCode::from(2);
        }
        for warning in config.warnings() {
            eprintln!("robots-proxy run: warning: {warning}");
        }
        print!("{}", config.to_toml_redacted());
        return ExitCode::SUCCESS;
    }
    start_logging(&config);
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Some(threads) = config.limits.worker_threads {
        runtime.worker_threads(threads);
    }
    let runtime = match runtime.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("robots-proxy run: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let mut signals = Signals::new();
        #[cfg(unix)]
        let _ = hangup_set().thread_unblock();
        let proxy = match Proxy::start(config).await {
            Ok(p) => p,
            Err(e) => {
                eprintln!("robots-proxy run: {e}");
                return ExitCode::from(2);
            }
        };
        announce(&proxy);
        loop {
            match signals.next().await {
                Signal::Stop => break,
                Signal::Reload => reload(&proxy, &args).await,
            }
        }
        tracing::info!("shutting down: no new connections, letting requests in flight finish");
        proxy.shutdown();
        if !proxy.drained().await {
            tracing::warn!("requests still in flight at the end of the grace period were cut off");
        }
        ExitCode::SUCCESS
    })
}

/// Logging as the config says; `RUST_LOG`, when set to a filter, overrides its
/// level. An empty `RUST_LOG` (`Environment=RUST_LOG=` in a unit) is unset,
/// not a filter that logs nothing; one that does not parse is said, and the
/// config's level is used.
fn start_logging(config: &Config) {
    use tracing_subscriber::EnvFilter;
    let from_env = std::env::var("RUST_LOG")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .map(|v| EnvFilter::try_new(&v).map_err(|e| (v, e)));
    let (filter, bad) = match from_env {
        Some(Ok(filter)) => (filter, None),
        Some(Err(bad)) => (EnvFilter::new(&config.log_level), Some(bad)),
        None => (EnvFilter::new(&config.log_level), None),
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr);
    match config.log_format {
        LogFormat::Json => logs.json().flatten_event(true).init(),
        LogFormat::Human => logs.with_ansi(io::stderr().is_terminal()).init(),
    }
    if let Some((value, error)) = bad {
        tracing::warn!(
            rust_log = %value,
            level = %config.log_level,
            "RUST_LOG is not a log filter ({error}); logging at the config's level (log.level)"
        );
    }
}

/// Says which bots are in report mode, if any: nothing robots.txt or their
/// limits would refuse is refused for them.
fn report_mode(bots: &robots_proxy::bots::Bots) {
    let reporting = bots.reporting();
    if !reporting.is_empty() {
        tracing::warn!(
            report_mode = %reporting.join(","),
            "bots in report mode: what robots.txt and their limits would refuse or delay is relayed at once, logged (would=, would_wait=) and counted (robots_proxy_report_only_total), not enforced"
        );
    }
}

/// What a started proxy logs: where it listens, its access rules, and what
/// the drop-in listeners need from the operator.
fn announce(proxy: &Proxy) {
    let at = |l| proxy.listens.get(l).map_or("off".into(), |a| a.to_string());
    tracing::info!(
        gemini = %at(Listener::Gemini),
        gopher = %at(Listener::Gopher),
        metrics = %at(Listener::Admin),
        certificate = %proxy.cert_path.display(),
        sha256 = %proxy.cert_fingerprint,
        threads = tokio::runtime::Handle::current().metrics().num_workers(),
        "robots-proxy listening"
    );
    let context = proxy.context();
    let config = &context.admission.config;
    let bots: Vec<&str> = config.bots.all().iter().map(|b| b.name.as_str()).collect();
    let allow_from: Vec<String> = config
        .access
        .allow_from
        .iter()
        .map(|p| p.to_string())
        .collect();
    tracing::info!(
        bots = %bots.join(","),
        default_bot = config.bots.default_bot().map_or("none", |b| bots[b]),
        allow_from = %allow_from.join(","),
        require_client_cert = config.access.require_client_cert,
        "access rules"
    );
    report_mode(&config.bots);
    if config.access.open_to_all() {
        tracing::warn!(
            allow_from = %allow_from.join(","),
            "access.allow_from admits every address: anyone who reaches these listeners can crawl through this proxy"
        );
    }
    if let (Some(addr), Some(ca)) = (proxy.listens.get(Listener::Socks5), &proxy.ca_cert_path) {
        tracing::info!(
            socks5 = %addr,
            ca_certificate = %ca.display(),
            "SOCKS5 drop-in listening; Gemini clients that check certificates must trust this CA"
        );
    }
    if let (Some(addr), Some(ca)) = (
        proxy.listens.get(Listener::Transparent),
        &proxy.ca_cert_path,
    ) {
        tracing::info!(
            transparent = %addr,
            upstream_mark = config.limits.upstream_mark.map(|m| format!("{m:#x}")).unwrap_or_else(|| "none".into()),
            ca_certificate = %ca.display(),
            "transparent listener: `robots-proxy transparent-rules` prints the firewall rules that send crawlers here"
        );
        if config.limits.upstream_mark.is_none() {
            tracing::warn!("transparent listener without limits.upstream_mark: the firewall rules must exempt the proxy's own connections another way (run it as its own user and catch only the crawler's, --crawler-user)");
        }
    }
    if let (Some(addr), Some(ca)) = (proxy.listens.get(Listener::Http), &proxy.ca_cert_path) {
        tracing::info!(
            http = %addr,
            ca_certificate = %ca.display(),
            "HTTP listener: point crawlers' HTTP_PROXY and HTTPS_PROXY at http://{addr}, and have them trust this CA (curl --cacert, REQUESTS_CA_BUNDLE); it ends the TLS of every CONNECT"
        );
    }
    for warning in config.warnings() {
        tracing::warn!("{warning}");
    }
}

/// SIGHUP alone, as a signal set.
#[cfg(unix)]
fn hangup_set() -> nix::sys::signal::SigSet {
    let mut set = nix::sys::signal::SigSet::empty();
    set.add(nix::sys::signal::Signal::SIGHUP);
    set
}

/// What the process was asked to do.
enum Signal {
    /// SIGINT or SIGTERM: drain and exit.
    Stop,
    /// SIGHUP: read the config again.
    Reload,
}

/// SIGINT, SIGTERM and SIGHUP, registered once at start so that none sent
/// while a reload runs is lost.
struct Signals {
    #[cfg(unix)]
    unix: Option<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)>,
}

impl Signals {
    fn new() -> Signals {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{signal, SignalKind};
            let unix = signal(SignalKind::terminate())
                .and_then(|term| Ok((term, signal(SignalKind::hangup())?)));
            if let Err(e) = &unix {
                tracing::warn!(error = %e, "SIGTERM and SIGHUP cannot be caught; only Ctrl-C stops the proxy");
            }
            Signals { unix: unix.ok() }
        }
        #[cfg(not(unix))]
        Signals {}
    }

    async fn next(&mut self) -> Signal {
        #[cfg(unix)]
        if let Some((term, hup)) = &mut self.unix {
            return tokio::select! {
                _ = tokio::signal::ctrl_c() => Signal::Stop,
                _ = term.recv() => Signal::Stop,
                _ = hup.recv() => Signal::Reload,
            };
        }
        let _ = tokio::signal::ctrl_c().await;
        Signal::Stop
    }
}

/// SIGHUP: the config file is read again with the same flags (which still
/// override it). A file that does not load or does not start keeps the
/// running config; either way the log says so and the reload is counted.
async fn reload(proxy: &Proxy, args: &RunArgs) {
    let metrics = proxy.context().admission.metrics.clone();
    let config = match Config::load(args) {
        Ok(c) => c,
        Err(e) => {
            metrics.reloaded(false);
            tracing::error!(error = %e, "reload refused: the config does not load; the running config stays");
            return;
        }
    };
    match proxy.reload(config).await {
        Ok(done) => {
            metrics.reloaded(true);
            if !done.kept.is_empty() {
                tracing::warn!(
                    keys = %done.kept.join(","),
                    "reload: these settings need a restart; their running values stay"
                );
            }
            let context = proxy.context();
            let bots = context.admission.config.bots.names();
            tracing::info!(
                bots = %bots.join(","),
                sha256 = %done.cert_fingerprint,
                "config reloaded: new connections use it; connections in flight finish with the old one"
            );
            report_mode(&context.admission.config.bots);
        }
        Err(e) => {
            metrics.reloaded(false);
            tracing::error!(error = %e, "reload refused; the running config stays");
        }
    }
}
