//! The command line as the user typed it. docs/architecture.md, "Command line": the names are a contract.

use std::path::PathBuf;

use clap::builder::{PossibleValue, TypedValueParser};
use clap::{Args, CommandFactory, Parser, Subcommand, ValueEnum, ValueHint};
use clap_complete::Shell;

use crate::listener::Listener;
use crate::robots::{valid_product_token, valid_virtual_agent};

#[derive(Debug, Parser)]
#[command(
    name = "robots-proxy",
    version,
    about = "A forward proxy for crawlers of the web and the small web (Gemini, Gopher, Spartan, Nex) that obeys robots.txt and Crawl-delay",
    long_about = "A forward proxy for crawlers of the web and the small web (Gemini, Gopher, Spartan, \
                  Nex): it fetches each host's robots.txt, refuses what the rules for your bot \
                  disallow, and spaces requests by Crawl-delay.\n\n\
                  `check` decides offline, with the same engine the proxy uses; `status` shows a \
                  running proxy's bots, budgets and hosts."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy: Gemini on 127.0.0.1:1965, Gopher on 127.0.0.1:7070.
    ///
    /// A Gemini crawler opens TLS to the proxy and sends an absolute URL for another
    /// host (`gemini://capsule.example/page.gmi`); a Gopher crawler sends a Gopher URL
    /// as its selector (`gopher://hole.example/1/`). Each gets the server's answer, or
    /// a refusal (`53`, or a type-3 menu) when robots.txt disallows it for this bot.
    /// With no config file the proxy runs on embedded defaults; flags override the file.
    Run(RunArgs),
    /// Decide offline whether a bot may fetch targets under a robots.txt.
    ///
    /// Prints `allow<TAB>TARGET` or `disallow<TAB>TARGET` per target. Exit 0 when
    /// every target was decided, 1 when a target could not be parsed (it gets an
    /// `error<TAB>TARGET<TAB>reason` line), 2 on bad flags or unreadable files.
    Check(CheckArgs),
    /// Print the iptables or nftables rules that send a crawler's connections to
    /// the transparent listener, for the config and flags `run` would use.
    ///
    /// Without --crawler-user, every connection in the network namespace is caught
    /// (the sidecar pattern) and the proxy's own pass by limits.upstream_mark. With
    /// it, only that user's are caught and the proxy runs as another user. Exit 2
    /// when the rules would loop or the listener is off.
    TransparentRules(RulesArgs),
    /// Show a running proxy's bots (mode, limits and what is left), daily
    /// budgets, fleet store, latest refusals and hosts, from its admin listener.
    ///
    /// The listener is found in STATE_DIR/listening (the state directory `run`
    /// uses with the same --config or --state-dir) unless --admin names it. A
    /// token ([admin] token) comes from --token or ROBOTS_PROXY_ADMIN_TOKEN. Exit
    /// 1 when the proxy cannot be asked, 2 on bad flags or config.
    Status(StatusArgs),
    /// Print a shell completion script, e.g.
    /// `robots-proxy completions bash > /etc/bash_completion.d/robots-proxy`.
    Completions(CompletionsArgs),
    /// Print a manual page (roff), e.g. `robots-proxy man run | man -l -`, or
    /// write them all with --out-dir.
    Man(ManArgs),
}

/// `robots-proxy man`.
#[derive(Debug, Args)]
pub struct ManArgs {
    /// A subcommand's page (robots-proxy-SUBCOMMAND(1)) rather than robots-proxy(1).
    #[arg(value_name = "SUBCOMMAND", value_parser = Suggest(any, SUBCOMMANDS), hide_possible_values = true)]
    pub subcommand: Option<String>,

    /// Write every page (robots-proxy.1, robots-proxy-run.1, …) into this directory.
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath, conflicts_with = "subcommand")]
    pub out_dir: Option<PathBuf>,
}

/// `robots-proxy status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The config file `run` uses (for its state directory).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub config: Option<PathBuf>,

    /// The state directory `run` uses (where it wrote `listening`).
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,

    /// The admin listener's address, instead of finding it in the state directory.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub admin: Option<std::net::SocketAddr>,

    /// The admin token ([admin] token); default: $ROBOTS_PROXY_ADMIN_TOKEN.
    #[arg(long, value_name = "TOKEN", value_hint = ValueHint::Other)]
    pub token: Option<String>,

    /// Print the JSON of /api/status as the proxy gave it (typed, so a field
    /// this version does not know is an error).
    #[arg(long)]
    pub json: bool,
}

/// `robots-proxy completions`.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// The completion script for `shell`: subcommands, and every subcommand's
/// flags and their values.
///
/// clap_complete's bash script names each subcommand's state twice, and for a
/// binary whose name holds a hyphen the two spellings differ
/// (`robots__proxy__subcmd__run` where the subcommand is found,
/// `robots__subcmd__proxy__subcmd__run` where its flags are listed), so
/// nothing after a subcommand completes. The second spelling is mended here.
pub fn completion_script(shell: Shell) -> Vec<u8> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), BIN, &mut script);
    match shell {
        Shell::Bash => {
            let text = String::from_utf8_lossy(&script);
            let found = BIN.replace('-', "__");
            let listed = BIN.replace('-', "__subcmd__");
            text.replace(
                &format!("{listed}__subcmd__"),
                &format!("{found}__subcmd__"),
            )
            .into_bytes()
        }
        Shell::Fish => {
            script.extend(fish_positionals().into_bytes());
            script
        }
        _ => script,
    }
}

/// What clap_complete's fish script leaves out: a subcommand's positional
/// values (`completions <TAB>`, `man <TAB>`), and no file names where a
/// subcommand takes none (`run <TAB>`, `check <TAB>` is a target).
fn fish_positionals() -> String {
    let mut lines = String::new();
    for sub in Cli::command().get_subcommands() {
        let positionals: Vec<_> = sub.get_positionals().collect();
        let takes_files = positionals.iter().any(|p| {
            matches!(
                p.get_value_hint(),
                ValueHint::AnyPath | ValueHint::FilePath | ValueHint::DirPath
            )
        });
        let condition = format!(
            "__fish_{}_using_subcommand {}",
            BIN.replace('-', "_"),
            sub.get_name()
        );
        let words: Vec<String> = positionals
            .iter()
            .flat_map(|p| p.get_possible_values())
            .map(|v| v.get_name().to_string())
            .collect();
        if !takes_files {
            lines.push_str(&format!("complete -c {BIN} -n \"{condition}\" -f\n"));
        }
        if !words.is_empty() {
            lines.push_str(&format!(
                "complete -c {BIN} -n \"{condition}\" -f -a \"{}\"\n",
                words.join(" ")
            ));
        }
    }
    lines
}

/// The binary's name, as shells and manual pages call it.
pub const BIN: &str = "robots-proxy";

/// How `transparent-rules` writes its rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum RulesSyntax {
    /// A shell script of iptables and ip6tables commands.
    Iptables,
    /// A file for `nft -f`.
    Nft,
}

#[derive(Debug, Args)]
pub struct RulesArgs {
    #[command(flatten)]
    pub run: RunArgs,

    /// Catch only this user's connections (a name or uid): a crawler running as
    /// its own Unix user on the proxy's machine.
    #[arg(long, value_name = "USER", value_hint = ValueHint::Username)]
    pub crawler_user: Option<String>,

    /// Destination ports to catch, comma-separated, or `all`: every TCP port but
    /// 53 (DNS), so what is none of the small web's protocols fails closed at
    /// the proxy. Default: every port of the config's `[ports]` table
    /// (1965, 70, 300, 1900).
    #[arg(long, value_name = "PORTS", value_hint = ValueHint::Other)]
    pub ports: Option<String>,

    /// The rules' syntax.
    #[arg(long, value_enum, default_value_t = RulesSyntax::Iptables)]
    pub syntax: RulesSyntax,
}

#[derive(Debug, Default, Args)]
pub struct RunArgs {
    /// TOML config file (commented example: config/robots-proxy.toml).
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub config: Option<PathBuf>,

    /// Address of the Gemini listener (TLS), e.g. 127.0.0.1:1965; `off` turns
    /// it off (every --*-listen flag takes `off`).
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub gemini_listen: Option<String>,

    /// Address of the Gopher listener (plain TCP), e.g. 127.0.0.1:7070; `off`
    /// turns it off.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub gopher_listen: Option<String>,

    /// Address of the SOCKS5 drop-in listener (off unless given), for crawlers that
    /// know no Gemini or Gopher proxy: `curl --socks5-hostname ADDR gopher://…`.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub socks5_listen: Option<String>,

    /// Address of the transparent listener (Linux; off unless given): connections
    /// that iptables or nftables REDIRECT sent here, for crawlers that know no proxy
    /// at all. `robots-proxy transparent-rules` prints the firewall rules.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub transparent_listen: Option<String>,

    /// Address of the HTTP(S) forward proxy (off unless given), for web
    /// crawlers: `HTTPS_PROXY=http://ADDR`, with the proxy's CA trusted by
    /// the client. It ends TLS for any host it is asked to `CONNECT` to.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub http_listen: Option<String>,

    /// Set this mark (SO_MARK, needs CAP_NET_ADMIN) on every upstream socket, so
    /// the transparent-mode rules let the proxy's own connections pass, e.g. 0x2a.
    #[arg(long, value_name = "N", value_hint = ValueHint::Other)]
    pub upstream_mark: Option<String>,

    /// Fleet mode: share the politeness gate, robots.txt and certificate pins
    /// with other proxies through Redis or Valkey, e.g. redis://127.0.0.1:6379,
    /// unix:///run/redis/redis.sock, a Cluster
    /// (redis+cluster://HOST:PORT,HOST:PORT,…) or Sentinel
    /// (redis+sentinel://HOST:PORT,HOST:PORT,…/MASTER_NAME).
    #[arg(long, value_name = "URL", value_hint = ValueHint::Url)]
    pub store: Option<String>,

    /// Address of the admin listener (default 127.0.0.1:9770): GET /metrics
    /// (Prometheus), /healthz, the status page (/ and /host/HOST:PORT) and its
    /// JSON (/api/status, /api/host/HOST:PORT), and the actions POST
    /// /api/pins/forget and /api/robots/forget. Who may read and act: [admin]
    /// in the config (allow_from, hosts, token). `off` turns it off.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub metrics_listen: Option<String>,

    /// Address of the Web Bot Auth key directory (off unless given): GET
    /// /.well-known/http-message-signatures-directory answers the public keys
    /// of the bots that sign (web_bot_auth), to publish behind the HTTPS
    /// origin their signature_agent names.
    #[arg(long, value_name = "ADDR", value_hint = ValueHint::Other)]
    pub key_directory_listen: Option<String>,

    /// The bot's product token, as robots.txt files name it (`examplebot`).
    #[arg(long, value_name = "NAME", value_hint = ValueHint::Other)]
    pub agent: Option<String>,

    /// A virtual agent the bot acts as (archiver, indexer, researcher, webproxy, or any word).
    /// Repeatable; replaces the config file's list.
    #[arg(long = "virtual-agent", value_name = "NAME", value_parser = Suggest(any, VIRTUAL_AGENTS), hide_possible_values = true)]
    pub virtual_agents: Vec<String>,

    /// Spacing between request starts to one host when its robots.txt gives the bot
    /// no Crawl-delay, e.g. 1s or 500ms.
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other)]
    pub default_delay: Option<String>,

    /// A request that would wait longer than this for its host's turn is answered
    /// "slow down" at once (Gemini 44, Gopher 3503, the web 429), e.g. 60s: sets
    /// politeness.max_wait and web_max_wait (a bot's own max_wait stands before it).
    #[arg(long, value_name = "DURATION", value_hint = ValueHint::Other)]
    pub max_wait: Option<String>,

    /// A PEM file of root certificates an HTTPS site may chain to, beside the
    /// system's (a local CA, a company's): added to [http] extra_roots.
    /// Repeatable. A file that is missing, unreadable or holds no root
    /// certificate stops the proxy before it binds (and fails --check-config).
    #[arg(long = "extra-roots", value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub extra_roots: Vec<PathBuf>,

    /// Allow upstreams in private, loopback and link-local ranges (refused by default).
    #[arg(long)]
    pub allow_private_upstreams: bool,

    /// Log format: `human` (the default) or `json` (one object per line).
    #[arg(long, value_name = "FORMAT", value_parser = Suggest(any, LOG_FORMATS), hide_possible_values = true)]
    pub log_format: Option<String>,

    /// Validate the configuration, print it in full (defaults included) as TOML, and exit.
    #[arg(long)]
    pub check_config: bool,

    /// Where the proxy keeps what must outlive a restart: the Gemini
    /// listener's certificate and key, the drop-in CA and the leaves it issued,
    /// the capsules' certificate pins, and bots' daily budgets (see FILES in
    /// robots-proxy-run(1)). Made owner-only if missing. Default:
    /// $XDG_STATE_HOME/robots-proxy, else ~/.local/state/robots-proxy.
    #[arg(long, value_name = "DIR", value_hint = ValueHint::DirPath)]
    pub state_dir: Option<PathBuf>,
}

impl RunArgs {
    /// The `--*-listen` flag of one listener of the table.
    pub fn listen(&self, listener: Listener) -> &Option<String> {
        match listener {
            Listener::Gemini => &self.gemini_listen,
            Listener::Gopher => &self.gopher_listen,
            Listener::Socks5 => &self.socks5_listen,
            Listener::Transparent => &self.transparent_listen,
            Listener::Http => &self.http_listen,
            Listener::Admin => &self.metrics_listen,
            Listener::KeyDirectory => &self.key_directory_listen,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Tab-separated lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The robots.txt to read; `-` reads standard input.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub robots: String,

    /// The bot's product token (`examplebot`; a `/version` suffix is ignored). Empty:
    /// only the virtual agents' groups and `*` apply.
    #[arg(long, value_name = "NAME", value_parser = parse_agent, value_hint = ValueHint::Other)]
    pub agent: String,

    /// A virtual agent the bot acts as: archiver, indexer, researcher, webproxy, or any word.
    /// Repeatable.
    #[arg(long = "virtual-agent", value_name = "NAME", value_parser = Suggest(parse_virtual_agent, VIRTUAL_AGENTS), hide_possible_values = true)]
    pub virtual_agents: Vec<String>,

    /// A use the bot declares for what it fetches (`train-ai`, `train-genai`,
    /// `search`, `ai-input`; `ai-train` is `train-ai`), as `content_usage` in
    /// its config: robots.txt's `Content-Usage` and `Content-Signal` lines
    /// refusing it disallow a target. Repeatable.
    #[arg(long = "content-usage", value_name = "USE", value_parser = Suggest(crate::robots::Use::parse, USES), hide_possible_values = true)]
    pub content_usage: Vec<crate::robots::Use>,

    /// Also print `crawl-delay<TAB>SECONDS` (or `none`) for the bot.
    #[arg(long)]
    pub crawl_delay: bool,

    /// Also print `sha256<TAB>HEX` of the robots.txt read: the digest a
    /// decision's log line and the status page name, so a decision can be
    /// reproduced from the very text it was made with.
    #[arg(long)]
    pub sha256: bool,

    /// Also print the group and the rule (with line numbers) that decided.
    #[arg(long)]
    pub explain: bool,

    /// Read gopher:// selectors as the Gopher robots.txt proposal's letter (no
    /// implied leading `/`), as `[gopher] literal_selectors = true` does.
    #[arg(long)]
    pub literal_selectors: bool,

    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,

    /// Read targets from a file, one per line (`-` for standard input), after those given
    /// as arguments. Blank lines are skipped.
    #[arg(long, value_name = "FILE", value_hint = ValueHint::FilePath)]
    pub targets_from: Option<String>,

    /// Paths or selectors (`/a/b`, `0/foo`), or full `gemini://`, `gopher://`,
    /// `http://`, `https://` URLs.
    #[arg(value_name = "TARGET", value_hint = ValueHint::Other)]
    pub targets: Vec<String>,
}

fn parse_agent(value: &str) -> Result<String, String> {
    // An empty token is a bot with no own group: its virtual agents and `*` apply.
    if value.is_empty() || valid_product_token(value) {
        Ok(value.to_string())
    } else {
        Err(
            "not a product token: use letters, digits, '_' and '-', optionally followed by \
             /VERSION (e.g. examplebot or ExampleBot/2.1)"
                .to_string(),
        )
    }
}

fn parse_virtual_agent(value: &str) -> Result<String, String> {
    if valid_virtual_agent(value) {
        Ok(value.to_string())
    } else {
        Err(
            "a virtual agent is one word of letters, digits, '_' and '-' (e.g. indexer)"
                .to_string(),
        )
    }
}

/// Words a shell offers for a value that takes any word: the value is still
/// checked by the parser, not by the list.
const VIRTUAL_AGENTS: &[&str] = &["archiver", "indexer", "researcher", "webproxy"];
const USES: &[&str] = &["train-ai", "train-genai", "search", "ai-input"];
const LOG_FORMATS: &[&str] = &["human", "json"];
const SUBCOMMANDS: &[&str] = &[
    "run",
    "check",
    "status",
    "transparent-rules",
    "completions",
    "man",
];

fn any(value: &str) -> Result<String, String> {
    Ok(value.to_string())
}

/// A value parser that accepts what its function accepts (with that
/// function's error) and offers `words` to shell completion.
#[derive(Clone)]
struct Suggest<T>(fn(&str) -> Result<T, String>, &'static [&'static str]);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Suggest<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        self.0.parse_ref(cmd, arg, value)
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            self.1.iter().map(|&word| PossibleValue::new(word)),
        ))
    }
}
