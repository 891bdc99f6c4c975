//! The documentation says what the code does:
//! - the README stays short, and its `console` examples print what the
//!   command prints (each `$ ` line is run with the built binary on `PATH`;
//!   the lines after it, up to the next `$ ` or the block's end, are its
//!   output, exactly);
//! - the guide's contents page lists every page and section;
//! - the metrics reference lists every metric the proxy registers, and none
//!   it does not;
//! - the configuration reference has every key of the commented example,
//!   with the default `--check-config` prints, and its bounds table gives
//!   the ranges the code enforces, for every key that has one;
//! - docs/architecture.md's module table has a row for every top-level
//!   module of `src/`, each row's "depends on" is that module's imports, and
//!   the imports make no cycle; no protocol under `src/protocols/` imports
//!   another.

use std::path::{Path, PathBuf};
use std::process::Command;

fn read(path: &str) -> String {
    std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(path))
        .unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The lines of `text` outside fenced code blocks.
fn prose(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|l| {
            if l.starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// `(command, expected output)` for each `$ ` line of each `console` block.
fn console_examples(text: &str) -> Vec<(String, String)> {
    let mut examples: Vec<(String, String)> = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("```") {
            inside = line.trim() == "```console";
            continue;
        }
        if !inside {
            continue;
        }
        match line.strip_prefix("$ ") {
            Some(command) => examples.push((command.to_string(), String::new())),
            None => {
                let (_, out) = examples.last_mut().expect("output before a command");
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    examples
}

#[test]
fn the_readme_is_short_and_its_examples_print_what_it_says() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(lines <= 400, "README.md has {lines} lines (at most 400)");
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_robots-proxy"));
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut pages = vec![("README.md".to_string(), readme)];
    for entry in
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide")).unwrap()
    {
        let p = entry.unwrap().path();
        let name = format!("docs/guide/{}", p.file_name().unwrap().to_string_lossy());
        pages.push((name.clone(), read(&name)));
    }
    let mut ran = 0;
    for (page, text) in &pages {
        for (command, expected) in console_examples(text) {
            let out = Command::new("bash")
                .args(["-c", &command])
                .env("PATH", &path)
                .output()
                .unwrap();
            let printed = String::from_utf8_lossy(&out.stdout);
            assert_eq!(printed, expected, "{page}: `{command}` printed otherwise");
            ran += 1;
        }
    }
    assert!(ran >= 2, "only {ran} examples found");
}

/// `(page, anchor)` of every `##` heading of the pages in `dir`.
fn sections(dir: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(dir)).unwrap() {
        let file = entry.unwrap().file_name().to_string_lossy().into_owned();
        if file == "README.md" || !file.ends_with(".md") {
            continue;
        }
        found.push((file.clone(), String::new()));
        for line in prose(&read(&format!("{dir}/{file}"))) {
            if let Some(title) = line.strip_prefix("## ") {
                found.push((file.clone(), anchor(title)));
            }
        }
    }
    found
}

/// GitHub's anchor for a heading.
fn anchor(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == ' ' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn the_contents_pages_list_every_page_and_section() {
    for dir in ["docs/guide", "docs/dev"] {
        let contents = read(&format!("{dir}/README.md"));
        for (page, section) in sections(dir) {
            let link = match section.is_empty() {
                true => format!("]({page})"),
                false => format!("]({page}#{section})"),
            };
            assert!(contents.contains(&link), "{dir}/README.md lacks {link}");
        }
    }
}

/// The names of the metric families the proxy registers (the opt-in
/// per-host family included).
fn registered_metrics() -> Vec<String> {
    let metrics = robots_proxy::metrics::Metrics::with(&["default"], Some(10));
    metrics
        .registry
        .gather()
        .iter()
        .map(|f| f.name().to_string())
        .collect()
}

#[test]
fn the_metrics_reference_matches_the_registry() {
    let doc = read("docs/guide/metrics.md");
    let registered = registered_metrics();
    for name in &registered {
        assert!(
            doc.contains(&format!("| `{name}` |")),
            "metrics.md lacks {name}"
        );
    }
    // Families with no series until first used are registered all the same:
    // their names are in the registration code.
    let code = read("src/metrics/mod.rs");
    for row in doc.lines().filter_map(|l| l.strip_prefix("| `")) {
        let name = row.split('`').next().unwrap();
        assert!(
            registered.iter().any(|r| r == name) || code.contains(&format!("\"{name}\"")),
            "metrics.md documents {name}, which the proxy does not register"
        );
    }
}

#[test]
fn the_configuration_reference_has_every_key_and_its_default() {
    let doc = read("docs/guide/configuration.md");
    let example = read("config/robots-proxy.toml");
    let mut section = String::new();
    let mut keys = Vec::new();
    for line in example.lines() {
        let bare = line.trim_start_matches(['#', ' ']);
        // A section header is a whole line: `[name]` or `[[name]]`.
        let name = bare
            .trim_end()
            .trim_start_matches('[')
            .trim_end_matches(']');
        if bare.starts_with('[')
            && bare.trim_end().ends_with(']')
            && !name.is_empty()
            && name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            section = name.to_string();
            continue;
        }
        let Some((key, _)) = bare.split_once(" = ") else {
            continue;
        };
        if key.is_empty()
            || !key
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            continue;
        }
        let full = match section.is_empty() {
            true => key.to_string(),
            false => format!("{section}.{key}"),
        };
        if !keys.contains(&full) {
            keys.push(full);
        }
    }
    assert!(
        keys.len() >= 60,
        "found only {} keys in the example",
        keys.len()
    );
    let row = |key: &str| -> &str {
        doc.lines()
            .find(|l| l.starts_with(&format!("| `{key}` |")))
            .unwrap_or_else(|| panic!("configuration.md has no row for {key}"))
    };
    for key in &keys {
        row(key);
    }
    // Every default --check-config prints is the row's.
    let flags = robots_proxy::cli::RunArgs {
        state_dir: Some("/state".into()),
        ..Default::default()
    };
    let config = robots_proxy::config::RawConfig::default()
        .resolve(&flags)
        .unwrap();
    let printed: toml::Table = config.to_toml().parse().unwrap();
    let mut checked = 0;
    for (section, table) in &printed {
        let Some(table) = table.as_table() else {
            continue;
        };
        for (key, value) in table {
            let full = format!("{section}.{key}");
            let text = match value.as_array() {
                Some(items) if items.len() > 6 => items[0].to_string(),
                _ => value.to_string(),
            };
            assert!(
                row(&full).contains(&text),
                "{full}: the default is {text}: {}",
                row(&full)
            );
            checked += 1;
        }
    }
    assert!(checked >= 40, "only {checked} defaults checked");
}

/// A range as the bounds table writes it, in milliseconds or as a count.
#[derive(Debug, Clone, Copy)]
enum Range {
    Millis(u64, u64),
    Count(u64, u64),
}

/// `500ms`, `1s`, `365d`, `1 MiB`, `1048576`: milliseconds for a duration
/// (`true`), else the number.
fn amount(text: &str) -> (u64, bool) {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (n, unit) = text.split_at(split);
    let n: u64 = n
        .parse()
        .unwrap_or_else(|_| panic!("not a bound: {text:?}"));
    match unit.trim() {
        "" => (n, false),
        "KiB" => (n << 10, false),
        "MiB" => (n << 20, false),
        "GiB" => (n << 30, false),
        "TiB" => (n << 40, false),
        "ms" => (n, true),
        "s" => (n * 1000, true),
        "m" => (n * 60_000, true),
        "h" => (n * 3_600_000, true),
        "d" => (n * 86_400_000, true),
        other => panic!("unknown unit {other:?} in {text:?}"),
    }
}

/// The bounds table: each key (a cell may name several: `politeness.a`,
/// `b` is `politeness.b`) and its range; rows that are not numbers (a log
/// level) are left out.
fn documented_bounds(doc: &str) -> Vec<(String, Range)> {
    let table = doc
        .split("## Bounds")
        .nth(1)
        .expect("configuration.md has a Bounds section");
    let mut bounds = Vec::new();
    for line in table.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        for pair in cells.chunks(3) {
            let (keys, range) = (pair[0], pair.get(1).copied().unwrap_or(""));
            if keys.is_empty() || !range.starts_with(|c: char| c.is_ascii_digit() || c == '≤') {
                continue;
            }
            let (min, max) = match range.strip_prefix('≤') {
                Some(max) => ((0, amount(max).1), amount(max)),
                None => {
                    let (a, b) = range
                        .split_once('–')
                        .unwrap_or_else(|| panic!("a range is `A – B` or `≤ B`: {range:?}"));
                    (amount(a), amount(b))
                }
            };
            let range = match max.1 {
                true => Range::Millis(min.0, max.0),
                false => Range::Count(min.0, max.0),
            };
            let mut section = "";
            // `bot.min_delay` (and each `[[bots]]`): the key is the first word.
            let keys = keys.split(" (").next().unwrap_or(keys);
            for key in keys.split(',').map(|k| k.trim().trim_matches('`')) {
                let full = match key.split_once('.') {
                    Some((s, _)) => {
                        section = s;
                        key.to_string()
                    }
                    None => format!("{section}.{key}"),
                };
                bounds.push((full, range));
            }
        }
    }
    bounds
}

/// The configuration with `key` set to `value` (TOML), as `run` resolves it:
/// `None` when accepted, else the error.
fn set(key: &str, value: &str) -> Option<String> {
    let (section, name) = key.split_once('.').unwrap();
    // A store's keys are read when there is a store.
    let store = match section {
        "store" => "url = \"redis://127.0.0.1:6379/0\"\n",
        _ => "",
    };
    let toml = format!("[{section}]\n{store}{name} = {value}\n");
    let flags = robots_proxy::cli::RunArgs {
        state_dir: Some("/state".into()),
        ..Default::default()
    };
    match robots_proxy::config::RawConfig::parse(&toml) {
        Err(e) => Some(e.to_string()),
        Ok(raw) => raw.resolve(&flags).err().map(|e| e.to_string()),
    }
}

/// Every range in the bounds table is the one the code enforces (each end
/// accepted, a step past it refused naming the key and the range), and
/// every key whose absurd value is refused as out of range is in the table.
#[test]
fn the_bounds_table_is_the_code_s() {
    let doc = read("docs/guide/configuration.md");
    let bounds = documented_bounds(&doc);
    assert!(bounds.len() >= 15, "{bounds:?}");
    for (key, range) in &bounds {
        let (value, min, max): (fn(u64) -> String, u64, u64) = match *range {
            Range::Millis(min, max) => (|n| format!("\"{n}ms\""), min, max),
            Range::Count(min, max) => (|n| n.to_string(), min, max),
        };
        for ok in [min, max] {
            assert_eq!(
                set(key, &value(ok)),
                None,
                "{key} = {} is in its range",
                value(ok)
            );
        }
        let mut past = vec![max + 1];
        if min > 0 {
            past.push(min - 1);
        }
        for n in past {
            let err = set(key, &value(n))
                .unwrap_or_else(|| panic!("{key} = {} is accepted: outside {range:?}", value(n)));
            assert!(
                err.contains(key.rsplit('.').next().unwrap()) && err.contains("out of range"),
                "{key} = {}: {err}",
                value(n)
            );
        }
    }
    // The other way: a key whose absurd value is out of range is in the table.
    let documented: Vec<&str> = bounds.iter().map(|(k, _)| k.as_str()).collect();
    let mut tried = 0;
    for line in doc.split("## Bounds").next().unwrap().lines() {
        let Some(rest) = line.strip_prefix("| `") else {
            continue;
        };
        let Some((key, default)) = rest.split_once("` | ") else {
            continue;
        };
        if !key.contains('.') || key.starts_with("bots.") {
            continue;
        }
        // The example value: the default, or the one after "unset (e.g.".
        let example = default.trim_start_matches("unset (e.g. ");
        let example = example.strip_prefix('`').unwrap_or(example);
        let absurd = match example {
            e if e.starts_with('"') && e[1..].starts_with(|c: char| c.is_ascii_digit()) => {
                "\"100000000d\""
            }
            e if e.starts_with(|c: char| c.is_ascii_digit()) => "1000000000000000",
            _ => continue,
        };
        tried += 1;
        if let Some(err) = set(key, absurd) {
            if err.contains("out of range") {
                assert!(
                    documented.contains(&key),
                    "{key} has a bound ({err}) the table does not give"
                );
            }
        }
    }
    assert!(tried >= 20, "only {tried} keys tried");
}

/// A top-level module of `src/` (a file `src/x.rs` or a folder `src/x/` is
/// module x; `main` and `lib` are none) and the code of each of its files:
/// comments and `#[cfg(test)]` items left out (as ../shared/tools/module_graph.py
/// reads them).
fn modules() -> std::collections::BTreeMap<String, Vec<String>> {
    fn walk(dir: &Path, files: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, files);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    walk(&src, &mut files);
    let mut modules: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for file in files {
        let rel = file.strip_prefix(&src).unwrap();
        let mut parts = rel.components();
        let first = parts
            .next()
            .unwrap()
            .as_os_str()
            .to_string_lossy()
            .into_owned();
        let name = match parts.next() {
            Some(_) => first,
            None => first.trim_end_matches(".rs").to_string(),
        };
        if name == "main" || name == "lib" {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        modules.entry(name).or_default().push(code_of(&text));
    }
    modules
}

/// `text` without comments and without `#[cfg(test)]` items.
fn code_of(text: &str) -> String {
    let mut uncommented = String::new();
    let mut rest = text;
    while let Some(start) = rest.find("/*") {
        // An opening with no close (a `/*` in a string) is no comment.
        let Some(end) = rest[start..].find("*/") else {
            break;
        };
        uncommented.push_str(&rest[..start]);
        rest = &rest[start + end + 2..];
    }
    uncommented.push_str(rest);
    let (mut out, mut depth, mut in_test, mut pending) = (String::new(), 0i64, false, false);
    for line in uncommented.lines() {
        let code = line.split("//").next().unwrap_or_default();
        if !in_test && code.trim_start().starts_with("#[cfg(test)]") {
            pending = true;
            continue;
        }
        if pending && !in_test {
            if code.trim().is_empty() {
                continue;
            }
            (in_test, depth, pending) = (true, 0, false);
        }
        if in_test {
            depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            if depth <= 0 && (code.contains('}') || code.trim_end().ends_with(';')) {
                in_test = false;
            }
            continue;
        }
        out.push_str(code);
        out.push('\n');
    }
    out
}

/// The top-level modules `code` names: `crate::x` and `crate::{x, y}`.
fn named(code: &str) -> std::collections::BTreeSet<String> {
    let ident = |s: &str| -> String {
        s.trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut names = std::collections::BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let after = &code[at + "crate::".len()..];
        match after.strip_prefix('{') {
            Some(group) => {
                let group = &group[..group.find('}').unwrap_or(group.len())];
                names.extend(group.split(',').map(ident));
            }
            None => {
                names.insert(ident(after));
            }
        }
    }
    names
}

/// docs/architecture.md's module table, read back: every module of `src/`
/// has its row, every row is a module, each row's "depends on" names
/// exactly the modules it imports, and the graph has no cycle. The
/// table cannot drift from the code: this test is the judge.
#[test]
fn the_architecture_table_is_the_import_graph() {
    use std::collections::{BTreeMap, BTreeSet};
    let modules = modules();
    let mut imports: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (name, files) in &modules {
        let used = files
            .iter()
            .flat_map(|code| named(code))
            .filter(|m| m != name && modules.contains_key(m));
        imports.insert(name.clone(), used.collect());
    }
    let doc = read("docs/architecture.md");
    let table: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with("| module | concept | depends on |"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .collect();
    let mut rows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for row in table {
        let name = row
            .split('`')
            .nth(1)
            .unwrap_or_else(|| panic!("a row without a module: {row}"));
        let name = name
            .trim_end_matches('/')
            .trim_end_matches(".rs")
            .to_string();
        let cell = row
            .trim_end_matches('|')
            .rsplit(" | ")
            .next()
            .unwrap_or_default();
        // Names, each maybe followed by a note in parentheses.
        let (mut depth, mut item, mut deps) = (0, String::new(), BTreeSet::new());
        for c in cell.chars().chain([',']) {
            match c {
                '(' => depth += 1,
                ')' => depth -= 1,
                ',' if depth == 0 => {
                    let word: String = item
                        .trim()
                        .trim_start_matches('`')
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if !word.is_empty() {
                        deps.insert(word);
                    }
                    item.clear();
                    continue;
                }
                _ => {}
            }
            item.push(c);
        }
        assert!(
            rows.insert(name.clone(), deps).is_none(),
            "two rows for {name}"
        );
    }
    let missing: Vec<_> = imports.keys().filter(|m| !rows.contains_key(*m)).collect();
    assert!(missing.is_empty(), "modules without a row: {missing:?}");
    let extra: Vec<_> = rows.keys().filter(|m| !imports.contains_key(*m)).collect();
    assert!(extra.is_empty(), "rows for no module: {extra:?}");
    for (name, deps) in &rows {
        let real = &imports[name];
        assert_eq!(
            deps, real,
            "docs/architecture.md: the row of {name} says it depends on {deps:?}; it imports {real:?}"
        );
    }
    // No cycle: each module can be placed after everything it imports.
    let mut placed: BTreeSet<&String> = BTreeSet::new();
    while placed.len() < imports.len() {
        let ready: Vec<&String> = imports
            .iter()
            .filter(|(m, deps)| !placed.contains(m) && deps.iter().all(|d| placed.contains(d)))
            .map(|(m, _)| m)
            .collect();
        assert!(
            !ready.is_empty(),
            "a cycle between top-level modules among {:?}",
            imports
                .keys()
                .filter(|m| !placed.contains(m))
                .collect::<Vec<_>>()
        );
        placed.extend(ready);
    }
}

/// The files of each folder of `src/` (a `mod.rs` and its children aside)
/// import each other one way: no circle between siblings (`a.rs` naming
/// `b.rs`'s items while `b.rs` names `a.rs`'s), whichever way they name
/// each other (`super::b`, `super::{b, …}`, `crate::folder::b`, from a
/// sibling folder's files too). A circle is two concepts in two files.
#[test]
fn no_circle_between_sibling_files() {
    use std::collections::{BTreeMap, BTreeSet};
    fn rust_files(dir: &Path) -> Vec<PathBuf> {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                files.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
        files
    }
    /// Whether `code` names the item `name` of the folder `module` (`a::b`).
    fn names(code: &str, module: &str, name: &str, depth: usize) -> bool {
        let up = "super::".repeat(depth);
        let word = |at: usize, text: &str| {
            !text[at + name.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        };
        let direct = [format!("{up}{name}"), format!("crate::{module}::{name}")];
        let plain = direct.iter().any(|prefix| {
            code.match_indices(prefix.as_str()).any(|(at, _)| {
                let before = code[..at].chars().next_back();
                !before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':')
                    && word(at + prefix.len() - name.len(), code)
            })
        });
        let grouped = [format!("{up}{{"), format!("crate::{module}::{{")]
            .iter()
            .any(|open| {
                code.match_indices(open.as_str()).any(|(at, _)| {
                    let group = &code[at + open.len()..];
                    let group = &group[..group.find('}').unwrap_or(group.len())];
                    group.split(',').any(|item| {
                        let item: String = item
                            .trim()
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .collect();
                        item == name
                    })
                })
            });
        plain || grouped
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut folders = vec![src.clone()];
    let mut checked = 0;
    while let Some(dir) = folders.pop() {
        let module = dir
            .strip_prefix(&src)
            .unwrap()
            .to_string_lossy()
            .replace('/', "::");
        let mut siblings: BTreeMap<String, Vec<(PathBuf, usize)>> = BTreeMap::new();
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                folders.push(path.clone());
                let files = rust_files(&path)
                    .into_iter()
                    .map(|f| {
                        let depth = f.strip_prefix(&path).unwrap().components().count();
                        // `sub/mod.rs` names its folder's siblings with one `super::`.
                        let depth = match f.file_name().is_some_and(|n| n == "mod.rs") {
                            true => depth,
                            false => depth + 1,
                        };
                        (f, depth)
                    })
                    .collect();
                siblings.insert(stem, files);
            } else if path.extension().is_some_and(|e| e == "rs")
                && !["mod", "lib", "main"].contains(&stem.as_str())
            {
                siblings.insert(stem, vec![(path, 1)]);
            }
        }
        let mut edges: BTreeMap<&String, BTreeSet<&String>> = BTreeMap::new();
        for (name, files) in &siblings {
            let codes: Vec<(String, usize)> = files
                .iter()
                .map(|(f, depth)| (code_of(&std::fs::read_to_string(f).unwrap()), *depth))
                .collect();
            let named: BTreeSet<&String> = siblings
                .keys()
                .filter(|other| *other != name)
                .filter(|other| {
                    codes
                        .iter()
                        .any(|(code, depth)| names(code, &module, other, *depth))
                })
                .collect();
            edges.insert(name, named);
        }
        checked += edges.len();
        let mut placed: BTreeSet<&String> = BTreeSet::new();
        while placed.len() < edges.len() {
            let ready: Vec<&String> = edges
                .iter()
                .filter(|(f, deps)| !placed.contains(*f) && deps.iter().all(|d| placed.contains(d)))
                .map(|(f, _)| *f)
                .collect();
            assert!(
                !ready.is_empty(),
                "{}: a circle between sibling files among {:?}",
                dir.display(),
                edges
                    .iter()
                    .filter(|(f, _)| !placed.contains(*f))
                    .collect::<Vec<_>>()
            );
            placed.extend(ready);
        }
    }
    assert!(checked > 100, "{checked} files and folders looked at");
}

/// Each protocol under `src/protocols/` is one folder that names no other
/// protocol: what they share lives below them.
#[test]
fn no_protocol_imports_another() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/protocols");
    let protocols: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(protocols.len() >= 4, "{protocols:?}");
    for own in &protocols {
        for entry in std::fs::read_dir(dir.join(own)).unwrap() {
            let path = entry.unwrap().path();
            let code = code_of(&std::fs::read_to_string(&path).unwrap());
            for other in protocols.iter().filter(|p| *p != own) {
                for named in [
                    format!("protocols::{other}"),
                    format!("super::{other}"),
                    format!("protocols::{{{other}"),
                ] {
                    assert!(
                        !code.contains(&named),
                        "{} names {other} ({named})",
                        path.display()
                    );
                }
            }
        }
    }
}

/// The example alerting rules name only metrics the proxy registers (a
/// histogram by its `_count`, `_sum` or `_bucket`), so a renamed metric
/// cannot leave an alert that never fires. (promtool checks the rules
/// themselves in the interop suite.)
#[test]
fn the_alert_rules_name_registered_metrics() {
    let rules = read("config/prometheus-alerts.yml");
    let code = read("src/metrics/mod.rs");
    let registered = registered_metrics();
    let mut named = 0;
    for word in rules.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')) {
        if !word.starts_with("robots_proxy_") {
            continue;
        }
        named += 1;
        let family = ["_count", "_sum", "_bucket"]
            .iter()
            .find_map(|s| word.strip_suffix(s))
            .unwrap_or(word);
        assert!(
            registered.iter().any(|r| r == family) || code.contains(&format!("\"{family}\"")),
            "config/prometheus-alerts.yml names {word}, which the proxy does not register"
        );
    }
    assert!(named >= 4, "the rules name the metrics they alert on");
}

/// `docs/guide/check.md` has a row for every flag `check` takes.
#[test]
fn the_check_page_lists_every_flag() {
    use clap::CommandFactory;
    let doc = read("docs/guide/check.md");
    let cli = robots_proxy::cli::Cli::command();
    let check = cli.find_subcommand("check").expect("a check subcommand");
    for arg in check.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        if long == "help" {
            continue;
        }
        assert!(
            doc.contains(&format!("| `--{long}")),
            "docs/guide/check.md has no row for --{long}"
        );
    }
}

/// Every snippet that points a crawler at the proxy for `https://` points it
/// there for `http://` too: a crawler told only `https_proxy` sends its
/// `http://` pages straight to the site, past robots.txt (found with Scrapy).
#[test]
fn a_crawler_pointed_at_the_proxy_is_pointed_for_both_schemes() {
    let mut pages = vec!["README.md".to_string()];
    for entry in
        std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide")).unwrap()
    {
        let p = entry.unwrap().path();
        pages.push(format!(
            "docs/guide/{}",
            p.file_name().unwrap().to_string_lossy()
        ));
    }
    let sets = |text: &str, var: &str| {
        let lower = text.to_ascii_lowercase();
        lower.match_indices(&format!("{var}=")).any(|(i, _)| {
            // Not the tail of a longer name (`https_proxy=` holds no `http_proxy=`).
            i == 0 || !lower.as_bytes()[i - 1].is_ascii_alphanumeric()
        })
    };
    let mut snippets = 0;
    for page in &pages {
        let text = read(page);
        let mut block = String::new();
        let mut fenced = false;
        for line in text.lines() {
            if line.starts_with("```") {
                if fenced && sets(&block, "https_proxy") {
                    snippets += 1;
                    assert!(
                        sets(&block, "http_proxy"),
                        "{page}: a snippet sets https_proxy but not http_proxy:\n{block}"
                    );
                }
                fenced = !fenced;
                block.clear();
                continue;
            }
            match fenced {
                true => {
                    block.push_str(line);
                    block.push('\n');
                }
                false => assert!(
                    !sets(line, "https_proxy") || sets(line, "http_proxy"),
                    "{page}: {line}"
                ),
            }
        }
    }
    assert!(snippets >= 1, "no snippet points a crawler at the proxy");
}
