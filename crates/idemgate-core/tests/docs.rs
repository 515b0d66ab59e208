//! The documentation is tested: `README.md` and every page of `docs/`
//! (docs/testing.md, "The documentation's tests", says what for).
//!
//! - Every code block names its language and holds: TOML parses and its
//!   `[vars]` configure working routes as the worker would; JSON parses;
//!   shell is valid `bash`, names only scripts, packages, test targets,
//!   fixtures, paths and operator routes that exist, and runs when it is
//!   not marked skipped; JavaScript and Python compile; a block that says
//!   it is a file is that file; Rust blocks are doc tests of
//!   `idemgate-origin`; the packages' examples are run by the packages'
//!   own tests; the PostgreSQL example runs on a PostgreSQL server.
//! - The references hold what the code has: every variable the
//!   configuration reads, every problem type with its status, every header
//!   the core sets, every `Idemgate-Decision` value and operator route.
//! - Every link stays in the repository (or goes to a third party's
//!   documentation) and reaches a file and heading that exist.
//!
//! A block marked `<!-- doc-test: skip: REASON -->` is not run; it is
//! still parsed, and the test prints how many were skipped and why.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use idemgate_core::config::Config;
use idemgate_core::problem::Problem;

// ---------------------------------------------------------------------------
// The pages and their code blocks.

fn repository() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository")
}

fn read(relative: &str) -> String {
    let path = repository().join(relative);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// The README and every page of the book, whose code blocks are checked.
fn pages() -> Vec<String> {
    let mut pages: Vec<String> = std::fs::read_dir(repository().join("docs"))
        .expect("docs/")
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".md"))
        .map(|name| format!("docs/{name}"))
        .collect();
    pages.sort();
    pages.insert(0, "README.md".into());
    pages
}

/// Pages whose links are checked: the book, and the READMEs beside code
/// that the book links to.
fn linked_pages() -> Vec<String> {
    let mut pages = pages();
    pages.extend(
        [
            "packages/node/README.md",
            "packages/python/README.md",
            "tests/vectors/README.md",
        ]
        .map(String::from),
    );
    pages
}

/// What the comment right above a block says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Directive {
    None,
    /// Not run here, for this reason.
    Skip(String),
    /// Run by that package's own tests, under this name.
    Package {
        folder: String,
        name: String,
    },
    /// Run on a PostgreSQL server by this test.
    Postgresql,
    /// The file at this path, verbatim.
    File(String),
    /// A remark for the reader (e.g. how a Rust block is compiled).
    Note,
}

#[derive(Debug, Clone)]
struct Block {
    page: String,
    line: usize,
    lang: String,
    directive: Directive,
    code: String,
}

impl Block {
    fn at(&self) -> String {
        format!("{}:{}", self.page, self.line)
    }
}

fn directive(line: &str) -> Option<Directive> {
    let inner = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let said = inner.strip_prefix("doc-test:")?.trim();
    Some(if let Some(reason) = said.strip_prefix("skip:") {
        Directive::Skip(reason.trim().to_string())
    } else if said == "postgresql" {
        Directive::Postgresql
    } else if let Some((folder, name)) = said
        .strip_prefix("packages/")
        .and_then(|rest| rest.split_once(' '))
    {
        Directive::Package {
            folder: format!("packages/{folder}"),
            name: name.trim().to_string(),
        }
    } else if said.starts_with("examples/") {
        Directive::File(said.to_string())
    } else {
        Directive::Note
    })
}

/// The fence a line opens or closes: its character and length.
fn fence(line: &str) -> Option<(u8, usize)> {
    let trimmed = line.trim_start_matches(' ');
    let first = *trimmed.as_bytes().first()?;
    if first != b'`' && first != b'~' {
        return None;
    }
    let run = trimmed.bytes().take_while(|byte| *byte == first).count();
    (run >= 3).then_some((first, run))
}

/// The fenced code blocks of a page, with their language and directive.
fn blocks_of(page: &str, text: &str) -> Vec<Block> {
    let lines: Vec<&str> = text.lines().collect();
    let mut blocks = Vec::new();
    let mut at = 0;
    while at < lines.len() {
        let Some((character, run)) = fence(lines[at]) else {
            at += 1;
            continue;
        };
        let opening = lines[at];
        let indent = opening.len() - opening.trim_start_matches(' ').len();
        let lang = opening.trim_start()[run..]
            .split_whitespace()
            .next()
            .unwrap_or("")
            .to_string();
        let said = lines[..at]
            .iter()
            .rev()
            .find(|line| !line.trim().is_empty())
            .and_then(|line| directive(line))
            .unwrap_or(Directive::None);
        let mut code = String::new();
        let mut end = at + 1;
        loop {
            assert!(
                end < lines.len(),
                "{page}:{}: a code block never closed",
                at + 1
            );
            let line = lines[end];
            let closes = fence(line).is_some_and(|(c, length)| c == character && length >= run)
                && line.trim().bytes().all(|byte| byte == character);
            if closes {
                break;
            }
            let spaces = line.len() - line.trim_start_matches(' ').len();
            code.push_str(&line[spaces.min(indent)..]);
            code.push('\n');
            end += 1;
        }
        blocks.push(Block {
            page: page.to_string(),
            line: at + 1,
            lang,
            directive: said,
            code,
        });
        at = end + 1;
    }
    blocks
}

fn blocks(page: &str) -> Vec<Block> {
    blocks_of(page, &read(page))
}

// ---------------------------------------------------------------------------
// Checks of one block.

/// A scratch file for a tool to read.
fn scratch(name: &str, contents: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("docs");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, contents).unwrap();
    path
}

fn run_tool(program: &str, args: &[&str], input: Option<&str>) -> Result<String, String> {
    let mut command = Command::new(program);
    command
        .args(args)
        .current_dir(repository())
        .stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command
        .spawn()
        .unwrap_or_else(|error| panic!("{program} is needed for this test: {error}"));
    if let Some(input) = input {
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
    }
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if output.status.success() {
        Ok(stdout)
    } else {
        Err(format!(
            "{program} {args:?}: {}\n{stdout}{}",
            output.status,
            String::from_utf8_lossy(&output.stderr)
        ))
    }
}

/// A value a scheme takes as its secret, for a route to be configured.
fn fake_secret(scheme: &str) -> String {
    match scheme {
        "adyen" | "adyen-platform" => {
            "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056".into()
        }
        "standard-webhooks" => "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw".into(),
        "braintree" => "public_key:private_key".into(),
        _ => "whsec_c2VjcmV0".into(),
    }
}

/// A `[vars]` table configured as the worker would configure it, with
/// every secret its routes name set.
fn configure(vars: &toml::Table) -> Result<(), String> {
    // As the runtime hands them over: strings as they are, anything else
    // as its JSON text (src/env.rs).
    let mut env: HashMap<String, String> = vars
        .iter()
        .map(|(name, value)| {
            let text = match value {
                toml::Value::String(text) => text.clone(),
                other => serde_json::to_string(other).unwrap(),
            };
            (name.clone(), text)
        })
        .collect();
    // A fragment shows the routes; a whole file has its own origin.
    env.entry("ORIGIN_URL".into())
        .or_insert_with(|| "https://origin.example".into());
    // The secret every deployment sets (docs/deploying.md, `wrangler
    // secret put FORWARD_SECRET`): a batch or reconciled route needs it.
    env.entry("FORWARD_SECRET".into())
        .or_insert_with(|| "a-forward-secret-for-the-docs".into());
    let top_scheme = vars
        .get("SIGNATURE_SCHEME")
        .and_then(toml::Value::as_str)
        .unwrap_or("none");
    if top_scheme != "none" {
        env.entry("SIGNING_SECRET".into())
            .or_insert_with(|| fake_secret(top_scheme));
    }
    let routes = vars.get("ROUTES").and_then(toml::Value::as_table);
    for route in routes.into_iter().flat_map(|routes| routes.values()) {
        let Some(route) = route.as_table() else {
            continue;
        };
        let scheme = route
            .get("signature")
            .or_else(|| route.get("signature_scheme"))
            .and_then(toml::Value::as_str)
            .unwrap_or(top_scheme);
        for field in ["signing_secret", "forward_secret", "admin_token"] {
            let names: Vec<&str> = match route.get(field) {
                Some(toml::Value::String(name)) => vec![name],
                Some(toml::Value::Array(names)) => {
                    names.iter().filter_map(toml::Value::as_str).collect()
                }
                _ => vec![],
            };
            for name in names {
                let value = match field {
                    "signing_secret" => fake_secret(scheme),
                    _ => "a-token-for-the-docs".into(),
                };
                env.insert(name.to_string(), value);
            }
        }
        let reconcile_key = route
            .get("reconcile")
            .and_then(|reconcile| reconcile.get("api_key"))
            .and_then(toml::Value::as_str);
        if let Some(name) = reconcile_key {
            env.insert(name.to_string(), "an-api-key-for-the-docs".into());
        }
    }
    let config = Config::from_lookup(|name| env.get(name).cloned())
        .map_err(|problem| format!("the configuration is refused: {}", problem.detail()))?;
    if let Some(broken) = config.broken.first() {
        return Err(format!(
            "route {} is broken: {}",
            broken.name,
            broken.problem.detail()
        ));
    }
    for route in &config.routes {
        let found = config.route_for(&route.path).map_err(|p| p.detail())?;
        if found.name != route.name {
            return Err(format!("{} reaches route {}", route.path, found.name));
        }
    }
    Ok(())
}

fn check_toml(block: &Block) -> Result<(), String> {
    let table: toml::Table = block
        .code
        .parse()
        .map_err(|error| format!("not TOML: {error}"))?;
    match table.get("vars") {
        Some(toml::Value::Table(vars)) => configure(vars),
        Some(_) => Err("[vars] is not a table".into()),
        None => Ok(()),
    }
}

fn check_json(block: &Block) -> Result<(), String> {
    if serde_json::from_str::<serde_json::Value>(&block.code).is_ok() {
        return Ok(());
    }
    // JSON lines: one document per line.
    for (number, line) in block.code.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        serde_json::from_str::<serde_json::Value>(line)
            .map_err(|error| format!("line {} is not JSON: {error}", number + 1))?;
    }
    Ok(())
}

/// The workspace's packages, by name, and their folders.
fn workspace_packages() -> BTreeMap<String, PathBuf> {
    let root: toml::Table = read("Cargo.toml").parse().unwrap();
    let mut packages = BTreeMap::new();
    for member in root["workspace"]["members"].as_array().unwrap() {
        let folder = repository().join(member.as_str().unwrap());
        let manifest: toml::Table = std::fs::read_to_string(folder.join("Cargo.toml"))
            .unwrap()
            .parse()
            .unwrap();
        let name = manifest["package"]["name"].as_str().unwrap().to_string();
        packages.insert(name, folder);
    }
    packages
}

/// A package's test targets: `tests/*.rs` and its `[[test]]` names.
fn test_targets(folder: &Path) -> BTreeSet<String> {
    let mut targets: BTreeSet<String> = std::fs::read_dir(folder.join("tests"))
        .into_iter()
        .flatten()
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".rs").map(str::to_string)
        })
        .collect();
    let manifest: toml::Table = std::fs::read_to_string(folder.join("Cargo.toml"))
        .unwrap()
        .parse()
        .unwrap();
    if let Some(tests) = manifest.get("test").and_then(toml::Value::as_array) {
        targets.extend(
            tests
                .iter()
                .filter_map(|test| test.get("name")?.as_str().map(str::to_string)),
        );
    }
    targets
}

/// The operator routes the worker serves: the paths its operator API
/// matches, and the page the assets serve.
fn operator_paths() -> BTreeSet<String> {
    let mut paths = BTreeSet::new();
    for source in ["src/admin.rs", "wrangler.toml"] {
        let text = read(source);
        let mut rest = text.as_str();
        while let Some(at) = rest.find("/__idemgate/") {
            let path: String = rest[at..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '-'))
                .collect();
            let path = path.trim_end_matches('/').to_string();
            // The end-to-end tests' hooks are no route of the release worker.
            let hook = path.starts_with("/__idemgate/test/");
            if path.len() > "/__idemgate/".len() && !hook {
                paths.insert(path);
            }
            rest = &rest[at + 1..];
        }
    }
    paths
}

/// Shell words, quotes removed, up to a comment.
fn words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match quote {
            Some(q) if c == q => quote = None,
            Some(_) => word.push(c),
            None if c == '\'' || c == '"' => {
                quote = Some(c);
                in_word = true;
            }
            None if c == '#' && !in_word => break,
            None if c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')') => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            None => {
                word.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(word);
    }
    words
}

/// Folders at the repository's root whose paths a shell block may name.
const TREE: &[&str] = &[
    "benches/",
    "crates/",
    "docs/",
    "examples/",
    "migrations/",
    "packages/",
    "scripts/",
    "src/",
    "tests/",
    "ui/",
];

/// Whether a path, with `*` in its last part and `{a,b}` anywhere,
/// names something in the repository.
fn exists(path: &str) -> bool {
    if let (Some(open), Some(close)) = (path.find('{'), path.find('}')) {
        return path[open + 1..close]
            .split(',')
            .all(|choice| exists(&format!("{}{choice}{}", &path[..open], &path[close + 1..])));
    }
    let full = repository().join(path.trim_end_matches('/'));
    if !path.contains('*') {
        return full.exists();
    }
    let (Some(folder), Some(pattern)) = (full.parent(), full.file_name()) else {
        return false;
    };
    let pattern = pattern.to_string_lossy();
    let (before, after) = pattern.split_once('*').unwrap();
    std::fs::read_dir(folder)
        .into_iter()
        .flatten()
        .any(|entry| {
            let name = entry.unwrap().file_name().to_string_lossy().into_owned();
            name.len() >= before.len() + after.len()
                && name.starts_with(before)
                && name.ends_with(after)
        })
}

/// What a shell block names: scripts, cargo packages and targets,
/// `scripts/send`'s providers and fixtures, repository paths, operator
/// routes.
fn check_shell_names(code: &str) -> Result<(), String> {
    let packages = workspace_packages();
    let fixtures = repository().join("crates/idemgate-send/fixtures");
    let operator = operator_paths();
    let joined = code.replace("\\\n", " ");
    for line in joined.lines() {
        let words = words(line);
        for (at, word) in words.iter().enumerate() {
            let word = word.strip_prefix("./").unwrap_or(word);
            // A path in the repository.
            if TREE.iter().any(|folder| word.starts_with(folder)) && !exists(word) {
                return Err(format!("{word} is not in the repository"));
            }
            // An operator route.
            if let Some(at) = word.find("/__idemgate/") {
                let path = word[at..].split(['?', '#']).next().unwrap();
                if !operator.contains(path.trim_end_matches('/')) {
                    return Err(format!("{path} is not an operator route ({operator:?})"));
                }
            }
            match word {
                "cargo" => check_cargo(&words[at + 1..], &packages)?,
                "scripts/send" => check_send(&words[at + 1..], &fixtures)?,
                _ => {}
            }
        }
    }
    Ok(())
}

fn check_cargo(args: &[String], packages: &BTreeMap<String, PathBuf>) -> Result<(), String> {
    let value = |flag: &str| {
        args.iter()
            .position(|arg| arg == flag)
            .and_then(|at| args.get(at + 1))
    };
    let package = match value("-p").or_else(|| value("--package")) {
        Some(name) => Some(
            packages
                .get(name.as_str())
                .ok_or_else(|| format!("cargo -p {name}: no such package"))?,
        ),
        None => None,
    };
    if let Some(test) = value("--test") {
        let folders: Vec<&PathBuf> = match package {
            Some(folder) => vec![folder],
            None => packages.values().collect(),
        };
        if !folders
            .iter()
            .any(|folder| test_targets(folder).contains(test.as_str()))
        {
            return Err(format!("cargo --test {test}: no such test target"));
        }
    }
    if let Some(example) = value("--example") {
        let folder = package.ok_or("cargo --example without -p")?;
        if !folder
            .join("examples")
            .join(format!("{example}.rs"))
            .exists()
        {
            return Err(format!("cargo --example {example}: no such example"));
        }
    }
    Ok(())
}

fn check_send(args: &[String], fixtures: &Path) -> Result<(), String> {
    const TAKES_A_VALUE: &[&str] = &[
        "--repeat",
        "--route",
        "--secret",
        "--vars",
        "--var",
        "--url",
        "--cert-url",
    ];
    let mut positional = Vec::new();
    let mut skip_next = false;
    for arg in args {
        if skip_next {
            skip_next = false;
        } else if TAKES_A_VALUE.contains(&arg.as_str()) {
            skip_next = true;
        } else if !arg.starts_with('-') {
            positional.push(arg.as_str());
        }
    }
    if let Some(provider) = positional.first() {
        if !fixtures.join(provider).is_dir() {
            return Err(format!("scripts/send {provider}: no such provider"));
        }
        if let Some(fixture) = positional.get(1) {
            if !fixtures
                .join(provider)
                .join(format!("{fixture}.txt"))
                .exists()
            {
                return Err(format!(
                    "scripts/send {provider} {fixture}: no such fixture"
                ));
            }
        }
    }
    Ok(())
}

fn check_shell(block: &Block, name: &str) -> Result<(), String> {
    let file = scratch(name, &block.code);
    run_tool("bash", &["-n", file.to_str().unwrap()], None)?;
    check_shell_names(&block.code)?;
    if block.directive == Directive::None {
        // Not marked skipped: it runs here, offline, in a few seconds.
        let started = Instant::now();
        run_tool(
            "timeout",
            &[
                "120",
                "bash",
                "-e",
                "-o",
                "pipefail",
                file.to_str().unwrap(),
            ],
            None,
        )
        .map_err(|error| format!("it does not run (mark it skipped, with why): {error}"))?;
        assert!(started.elapsed() < Duration::from_secs(120));
    }
    Ok(())
}

fn check_js(block: &Block, name: &str) -> Result<(), String> {
    let file = scratch(&format!("{name}.mjs"), &block.code);
    run_tool("node", &["--check", file.to_str().unwrap()], None).map(drop)
}

fn check_python(block: &Block, name: &str) -> Result<(), String> {
    run_tool(
        "python3",
        &[
            "-c",
            "import ast, sys; ast.parse(sys.stdin.read(), sys.argv[1])",
            name,
        ],
        Some(&block.code),
    )
    .map(drop)
}

/// Where the Rust blocks are compiled: as doc tests of idemgate-origin.
const RUST_PAGE: &str = "docs/origin.md";

fn check_rust(block: &Block) -> Result<(), String> {
    if block.page != RUST_PAGE {
        return Err(format!(
            "Rust blocks are compiled as doc tests of idemgate-origin, which includes {RUST_PAGE} only"
        ));
    }
    let lib = read("crates/idemgate-origin/src/lib.rs");
    if !lib.contains(&format!("include_str!(\"../../../{RUST_PAGE}\")")) {
        return Err(format!(
            "crates/idemgate-origin/src/lib.rs no longer includes {RUST_PAGE} as doc tests"
        ));
    }
    Ok(())
}

/// The test file of a package that runs its examples of the docs.
fn package_docs_test(folder: &str) -> Option<&'static str> {
    match folder {
        "packages/node" => Some("packages/node/test/docs.test.mjs"),
        "packages/python" => Some("packages/python/tests/test_docs.py"),
        _ => None,
    }
}

fn check_block(block: &Block, index: usize) -> Result<(), String> {
    let name = format!("{}-{}", block.page.replace(['/', '.'], "-"), index);
    match block.lang.as_str() {
        "" => {
            return Err(
                "a code block without a language: name one (sh, toml, json, js, python, rust, sql, text)".into(),
            )
        }
        "text" => {}
        "toml" => check_toml(block)?,
        "json" => check_json(block)?,
        "sh" => check_shell(block, &format!("{name}.sh"))?,
        "js" => check_js(block, &name)?,
        "python" => check_python(block, &name)?,
        "rust" => check_rust(block)?,
        "sql" => {
            if !matches!(block.directive, Directive::Postgresql | Directive::Skip(_)) {
                return Err("SQL runs on PostgreSQL (`doc-test: postgresql`) or is marked skipped".into());
            }
        }
        other => return Err(format!("a language this test does not check: {other}")),
    }
    match &block.directive {
        Directive::File(path) if block.code.trim_end() != read(path).trim_end() => {
            return Err(format!("not {path} verbatim"));
        }
        Directive::Package { folder, name } => {
            let test = package_docs_test(folder)
                .ok_or_else(|| format!("{folder} runs no examples of the docs"))?;
            let quoted = [format!("\"{name}\""), format!("'{name}'")];
            if !quoted.iter().any(|name| read(test).contains(name.as_str())) {
                return Err(format!("{test} does not run the example {name:?}"));
            }
        }
        Directive::Postgresql if block.lang != "sql" => {
            return Err("only SQL runs on PostgreSQL".into())
        }
        _ => {}
    }
    Ok(())
}

#[test]
fn every_code_block_names_its_language_and_holds() {
    let mut failures = Vec::new();
    let mut checked: BTreeMap<String, usize> = BTreeMap::new();
    let mut skipped: Vec<String> = Vec::new();
    for page in pages() {
        for (index, block) in blocks(&page).iter().enumerate() {
            if let Err(failure) = check_block(block, index) {
                failures.push(format!("{}: {failure}", block.at()));
            }
            *checked.entry(block.lang.clone()).or_default() += 1;
            if let Directive::Skip(reason) = &block.directive {
                skipped.push(format!("{} ({}): {reason}", block.at(), block.lang));
            }
        }
    }
    let total: usize = checked.values().sum();
    println!("{total} code blocks: {checked:?}");
    println!(
        "{} skipped (not run here; still parsed):\n  {}",
        skipped.len(),
        skipped.join("\n  ")
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(total > 50, "found only {total} code blocks");
}

#[test]
fn the_block_reader_finds_fences_directives_and_indented_blocks() {
    let page = "Text\n\n<!-- doc-test: skip: needs an account -->\n```sh\nwrangler login\n```\n\n1. Step:\n\n   ```toml\n   a = 1\n   ```\n\n````text\n```\n````\n";
    let found = blocks_of("page.md", page);
    assert_eq!(found.len(), 3);
    assert_eq!(
        found[0].directive,
        Directive::Skip("needs an account".into())
    );
    assert_eq!(
        (found[0].lang.as_str(), found[0].code.as_str()),
        ("sh", "wrangler login\n")
    );
    assert_eq!(
        (found[1].lang.as_str(), found[1].code.as_str()),
        ("toml", "a = 1\n")
    );
    assert_eq!(found[1].directive, Directive::None);
    assert_eq!(found[2].code, "```\n");
    assert_eq!(
        words("curl 'a b' -H \"x: y\" # c"),
        ["curl", "a b", "-H", "x: y"]
    );
}

// ---------------------------------------------------------------------------
// The references against the code's own lists.

fn source(relative: &str) -> String {
    read(&format!("crates/idemgate-core/src/{relative}"))
}

/// The body of `fn <name>` in `text`: up to the next `pub fn`.
fn function<'a>(text: &'a str, signature: &str) -> &'a str {
    let start = text
        .find(signature)
        .unwrap_or_else(|| panic!("{signature} is gone"));
    let rest = &text[start + signature.len()..];
    let end = rest.find("pub fn ").unwrap_or(rest.len());
    &rest[..end]
}

/// The string literals of a piece of source.
fn literals(text: &str) -> Vec<String> {
    text.split('"')
        .enumerate()
        .filter(|(index, _)| index % 2 == 1)
        .map(|(_, literal)| literal.to_string())
        .collect()
}

/// A match's arms: the `Problem::` variants of each arm, with what the arm
/// gives (the literal or the number after `=>`).
fn arms(body: &str, value: impl Fn(&str) -> Option<String>) -> Vec<(String, String)> {
    let mut arms = Vec::new();
    let mut variants: Vec<String> = Vec::new();
    for line in body.lines() {
        let mut rest = line;
        while let Some(at) = rest.find("Problem::") {
            let name: String = rest[at + 9..]
                .chars()
                .take_while(char::is_ascii_alphanumeric)
                .collect();
            variants.push(name);
            rest = &rest[at + 9..];
        }
        if let Some(value) = value(line) {
            for variant in variants.drain(..) {
                arms.push((variant, value.clone()));
            }
        }
    }
    arms
}

/// Every problem type the core produces, with its statuses.
fn problem_types() -> BTreeMap<String, BTreeSet<u16>> {
    let text = source("problem.rs");
    let names = arms(function(&text, "pub fn name(&self)"), |line| {
        literals(line).into_iter().next()
    });
    let statuses: HashMap<String, u16> = arms(function(&text, "pub fn status(&self)"), |line| {
        let (_, after) = line.split_once("=>")?;
        after
            .trim()
            .trim_end_matches(',')
            .parse::<u16>()
            .ok()
            .map(|s| s.to_string())
    })
    .into_iter()
    .map(|(variant, status)| (variant, status.parse().unwrap()))
    .collect();
    let mut types: BTreeMap<String, BTreeSet<u16>> = BTreeMap::new();
    for (variant, name) in names {
        let status = statuses
            .get(&variant)
            .unwrap_or_else(|| panic!("Problem::{variant} has no status"));
        types.entry(name).or_default().insert(*status);
    }
    // The reading is of the real list: a few known ones, with their status.
    assert_eq!(types["origin-busy"], BTreeSet::from([429]));
    assert_eq!(types["storage-unavailable"], BTreeSet::from([503]));
    assert_eq!(
        types["fingerprint-mismatch"],
        BTreeSet::from([Problem::FingerprintMismatch.status()])
    );
    assert!(types.len() >= 22, "{types:?}");
    types
}

/// Every variable the configuration reads (its string literals of capitals).
fn configuration_variables() -> BTreeSet<String> {
    let mut variables = BTreeSet::new();
    for file in ["mod.rs", "route.rs", "settings.rs", "values.rs"] {
        for literal in literals(&source(&format!("config/{file}"))) {
            let name = literal.len() >= 3
                && literal.starts_with(|c: char| c.is_ascii_uppercase())
                && literal
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_');
            if name {
                variables.insert(literal);
            }
        }
    }
    for known in [
        "ROUTES",
        "MAX_IN_FLIGHT",
        "RATE_PER_SECOND",
        "GIVE_UP_STATUSES",
        "DEAD_RETENTION_SECONDS",
        "SIGNATURE_CERT_HOSTS",
        "SIGNING_SECRET_PREVIOUS",
        "SWEEP_LIMIT",
    ] {
        assert!(variables.contains(known), "{known} is not read any more?");
    }
    variables
}

/// A route's fields: each route variable in lowercase, and the shorter
/// names some have (`origin`, `mode`, `signature`).
fn route_fields() -> BTreeSet<String> {
    let text = source("config/settings.rs");
    let start = text.find("const ROUTE_VARIABLES").expect("ROUTE_VARIABLES");
    let list = &text[start..start + text[start..].find("];").unwrap()];
    let mut fields: BTreeSet<String> = literals(list)
        .iter()
        .map(|variable| variable.to_ascii_lowercase())
        .collect();
    for line in text.lines().filter(|line| line.contains("=> names.push(")) {
        fields.extend(literals(line).into_iter().skip(1));
    }
    assert!(fields.contains("origin") && fields.contains("max_in_flight"));
    fields
}

#[test]
fn the_configuration_reference_names_every_variable_and_route_field() {
    let reference = read("docs/configuration.md");
    let missing: Vec<String> = configuration_variables()
        .into_iter()
        .chain(route_fields())
        .filter(|name| !reference.contains(&format!("`{name}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "docs/configuration.md does not name {missing:?}"
    );
}

/// The table rows of a page.
fn rows(page: &str) -> Vec<String> {
    read(page)
        .lines()
        .filter(|line| line.trim_start().starts_with('|'))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_http_reference_names_every_problem_type_with_its_status() {
    let rows = rows("docs/http.md");
    let mut missing = Vec::new();
    for (name, statuses) in problem_types() {
        for status in statuses {
            let listed = rows.iter().any(|row| {
                let cells: Vec<&str> = row.split('|').map(str::trim).collect();
                cells.contains(&format!("`{name}`").as_str())
                    && cells.iter().any(|cell| {
                        cell.split([',', ' '])
                            .any(|part| part == status.to_string())
                    })
            });
            if !listed {
                missing.push(format!("{status} {name}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "docs/http.md's problem table lacks {missing:?}"
    );
}

/// Every header the core sets on an answer or a forward.
fn headers_set() -> BTreeSet<String> {
    use idemgate_core::key::IdempotencyKey;
    use idemgate_core::origin::{Idempotency, OutboundRequest};
    let key = IdempotencyKey::parse("order-42", "test").unwrap();
    let forward = OutboundRequest {
        method: "POST".into(),
        url: "https://origin.example/payments".into(),
        headers: vec![],
        body: vec![],
        via: None,
    }
    .with_idempotency(&Idempotency {
        key: &key,
        scope: "scope",
        epoch: 1,
        path_and_query: "/payments",
        body_sha256: "hash",
        forward_secret: Some("secret"),
        unix_seconds: 1,
        // Every header the core may set: a reconciled forward, sent late.
        source: Some("reconciliation"),
        stale: true,
    });
    let problem = idemgate_core::answer::render_problem(&Problem::InFlight {
        retry_after_secs: 1,
    });
    let mut headers: BTreeSet<String> = forward
        .headers
        .iter()
        .chain(problem.headers.iter())
        .map(|(name, _)| name.to_ascii_lowercase())
        .collect();
    headers.extend(
        [
            idemgate_core::headers::REPLAYED,
            idemgate_core::headers::DECISION,
            idemgate_core::headers::RECEIPT_ID,
            idemgate_core::answer::BODY_OMITTED,
        ]
        .map(str::to_ascii_lowercase),
    );
    assert_eq!(headers.len(), 13, "{headers:?}");
    headers
}

#[test]
fn the_http_reference_names_every_header_decision_and_operator_route() {
    let reference = read("docs/http.md");
    let lowered = reference.to_ascii_lowercase();
    let mut missing: Vec<String> = headers_set()
        .into_iter()
        .filter(|header| !lowered.contains(&format!("`{header}")))
        .collect();
    let decisions = literals(function(&source("answer.rs"), "pub fn decision(&self)"));
    assert!(decisions.len() >= 10, "{decisions:?}");
    missing.extend(
        decisions
            .into_iter()
            .filter(|decision| {
                !rows("docs/http.md")
                    .iter()
                    .any(|row| row.starts_with(&format!("| `{decision}`")))
            })
            .map(|decision| format!("Idemgate-Decision: {decision}")),
    );
    missing.extend(operator_paths().into_iter().filter(|path| {
        !reference.contains(&format!("{path}`")) && !reference.contains(&format!("{path}?"))
    }));
    assert!(missing.is_empty(), "docs/http.md does not name {missing:?}");
}

// ---------------------------------------------------------------------------
// Links.

/// Websites a page may link to: third parties' documentation.
const THIRD_PARTY_DOCS: &[&str] = &[
    "developers.cloudflare.com",
    "docs.stripe.com",
    "docs.adyen.com",
    "docs.github.com",
    "shopify.dev",
    "developer.paddle.com",
    "developer.squareup.com",
    "www.checkout.com",
    "razorpay.com",
    "api.slack.com",
    "www.twilio.com",
    "developer.paypal.com",
    "developer.paypal.com",
    "www.standardwebhooks.com",
    "datatracker.ietf.org",
    "www.rfc-editor.org",
    "nodejs.org",
    "expressjs.com",
    "hono.dev",
    "docs.python.org",
    "www.starlette.io",
    "fastapi.tiangolo.com",
    "flask.palletsprojects.com",
    "www.postgresql.org",
    "docs.rs",
    "doc.rust-lang.org",
];

/// The page without its code: fenced blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced: Option<(u8, usize)> = None;
    for line in text.lines() {
        match (fenced, fence(line)) {
            (None, Some(open)) => fenced = Some(open),
            (Some((c, run)), Some((d, length))) if c == d && length >= run => fenced = None,
            (Some(_), _) => {}
            (None, None) => {
                let mut in_code = false;
                for part in line.split('`') {
                    if !in_code {
                        out.push_str(part);
                    }
                    in_code = !in_code;
                }
            }
        }
        out.push('\n');
    }
    out
}

/// Every link target of a page: `[text](target)`, `![alt](target)`,
/// `[label]: target`, `href="target"` and `src="target"`.
fn links(text: &str) -> Vec<String> {
    let text = prose(text);
    let mut targets = Vec::new();
    let mut rest = text.as_str();
    while let Some(at) = rest.find("](") {
        let after = &rest[at + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end.min(after.len())..];
    }
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            if let Some((label, target)) = line.split_once("]:") {
                if !label.contains("](") {
                    targets.push(target.split_whitespace().next().unwrap_or("").to_string());
                }
            }
        }
        for attribute in ["href=\"", "src=\""] {
            let mut rest = line;
            while let Some(at) = rest.find(attribute) {
                let after = &rest[at + attribute.len()..];
                let end = after.find('"').unwrap_or(after.len());
                targets.push(after[..end].to_string());
                rest = &after[end..];
            }
        }
    }
    targets
}

/// GitHub's anchor for a heading.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a page: its headings' (numbered when repeated, as
/// GitHub does) and any `id` or `name` it sets.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut anchors = BTreeSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut fenced: Option<(u8, usize)> = None;
    for line in text.lines() {
        match (fenced, fence(line)) {
            (None, Some(open)) => {
                fenced = Some(open);
                continue;
            }
            (Some((c, run)), Some((d, length))) if c == d && length >= run => {
                fenced = None;
                continue;
            }
            (Some(_), _) => continue,
            _ => {}
        }
        if let Some(heading) = line.strip_prefix('#') {
            let heading = heading.trim_start_matches('#');
            // A link in a heading counts by its text.
            let text: String = heading
                .replace("](", "\u{0}")
                .split('\u{0}')
                .next()
                .unwrap()
                .to_string();
            let base = slug(&text);
            let count = seen.entry(base.clone()).or_default();
            anchors.insert(match *count {
                0 => base.clone(),
                n => format!("{base}-{n}"),
            });
            *count += 1;
        }
        for attribute in ["id=\"", "name=\""] {
            if let Some(at) = line.find(attribute) {
                let after = &line[at + attribute.len()..];
                anchors.insert(after[..after.find('"').unwrap_or(0)].to_string());
            }
        }
    }
    anchors
}

/// `path` with `.` and `..` resolved, or `None` if it climbs above its root.
fn lexical(path: &Path) -> Option<PathBuf> {
    let mut parts: Vec<&std::ffi::OsStr> = Vec::new();
    for component in path.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                parts.pop()?;
            }
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(parts.iter().collect())
}

fn check_link(page: &str, target: &str) -> Result<(), String> {
    if target.starts_with("http://") || target.starts_with("https://") {
        let url = url::Url::parse(target).map_err(|error| format!("{target}: {error}"))?;
        let host = url.host_str().unwrap_or("");
        return if THIRD_PARTY_DOCS.contains(&host) {
            Ok(())
        } else {
            Err(format!(
                "{target}: a website outside the repository; only third parties' documentation may be linked (THIRD_PARTY_DOCS)"
            ))
        };
    }
    if target.is_empty()
        || target.contains("://")
        || target.starts_with("mailto:")
        || target.starts_with('/')
    {
        return Err(format!("{target:?}: not a path in the repository"));
    }
    let (path, anchor) = match target.split_once('#') {
        Some((path, anchor)) => (path, Some(anchor)),
        None => (target, None),
    };
    let file = if path.is_empty() {
        PathBuf::from(page)
    } else {
        let joined = Path::new(page).parent().unwrap().join(path);
        lexical(&joined).ok_or_else(|| format!("{target}: outside the repository"))?
    };
    let full = repository().join(&file);
    if !full.exists() {
        return Err(format!("{target}: {} does not exist", file.display()));
    }
    // No way out through a link in the tree either.
    if !full.canonicalize().unwrap().starts_with(repository()) {
        return Err(format!("{target}: outside the repository"));
    }
    if let Some(anchor) = anchor {
        if !file.to_string_lossy().ends_with(".md") {
            return Ok(()); // a line anchor in a source file
        }
        let text = std::fs::read_to_string(&full).unwrap();
        if !anchors(&text).contains(anchor) {
            return Err(format!(
                "{target}: no heading #{anchor} in {}",
                file.display()
            ));
        }
    }
    Ok(())
}

#[test]
fn every_link_stays_in_the_repository_and_resolves() {
    let mut failures = Vec::new();
    let mut count = 0;
    for page in linked_pages() {
        let text = read(&page);
        if text.contains("../shared") || text.contains("SPEC.md") {
            failures.push(format!("{page}: names a document outside the repository"));
        }
        for target in links(&text) {
            count += 1;
            if let Err(failure) = check_link(&page, &target) {
                failures.push(format!("{page}: {failure}"));
            }
        }
    }
    println!("{count} links checked");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(count > 100, "found only {count} links");
}

#[test]
fn the_link_checker_refuses_what_it_should() {
    assert!(check_link("README.md", "docs/origin.md#rust-the-idemgate-origin-crate").is_ok());
    assert!(check_link("docs/http.md", "../crates/idemgate-origin/src/lib.rs").is_ok());
    for bad in [
        "../shared/SPEC.md",
        "docs/../../outside.md",
        "docs/nowhere.md",
        "docs/origin.md#no-such-heading",
        "https://example.com/spec",
        "/etc/passwd",
        "file:///etc/passwd",
    ] {
        assert!(check_link("README.md", bad).is_err(), "{bad}");
    }
    assert_eq!(
        slug("Rust: the `idemgate-origin` crate"),
        "rust-the-idemgate-origin-crate"
    );
    assert_eq!(
        anchors("# A\n## B\n## B\n```\n# not a heading\n```\n"),
        BTreeSet::from(["a".into(), "b".into(), "b-1".into()])
    );
    assert_eq!(
        links("[a](x.md) `[b](y.md)` ![c](z.png)\n[d]: w.md"),
        ["x.md", "z.png", "w.md"]
    );
}

// ---------------------------------------------------------------------------
// The README and the book's index.

#[test]
fn the_readme_is_short_and_the_index_lists_every_page() {
    let readme = read("README.md");
    let lines = readme.lines().count();
    assert!(
        lines <= 300,
        "README.md has {lines} lines; the book is docs/"
    );
    // The two commands, as CI calls the second.
    for command in [
        "scripts/dev    # run idemgate locally",
        "scripts/test   # run every test",
    ] {
        assert!(readme.contains(&format!("\n{command}")), "{command}");
    }
    assert!(read(".ci/run").contains("scripts/test"));
    // The benchmark summary is one block, to be replaced whole.
    let start = readme
        .find("<!-- benchmark-summary: start")
        .expect("its start");
    let end = readme
        .find("<!-- benchmark-summary: end -->")
        .expect("its end");
    assert!(start < end);
    let index = read("docs/README.md");
    let unlisted: Vec<String> = pages()
        .into_iter()
        .filter_map(|page| page.strip_prefix("docs/").map(str::to_string))
        .filter(|page| page != "README.md" && !index.contains(&format!("]({page})")))
        .collect();
    assert!(
        unlisted.is_empty(),
        "docs/README.md does not list {unlisted:?}"
    );
}

// ---------------------------------------------------------------------------
// The PostgreSQL example, on a PostgreSQL server.

/// A throwaway PostgreSQL server on a Unix socket in a scratch folder.
struct Postgres {
    bin: PathBuf,
    dir: PathBuf,
    as_postgres: bool,
}

impl Postgres {
    fn start() -> Postgres {
        let bin = Command::new("pg_config")
            .arg("--bindir")
            .output()
            .ok()
            .filter(|output| output.status.success())
            .map(|output| PathBuf::from(String::from_utf8_lossy(&output.stdout).trim()))
            .filter(|bin| bin.join("initdb").exists())
            .or_else(|| {
                let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
                    .ok()?
                    .filter_map(|entry| Some(entry.ok()?.path().join("bin")))
                    .filter(|bin| bin.join("initdb").exists())
                    .collect();
                found.sort();
                found.pop()
            })
            .expect("PostgreSQL (initdb, pg_ctl, psql) is needed for this test: apt-get install postgresql");
        // initdb refuses to run as root: then the server runs as `postgres`.
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|output| String::from_utf8_lossy(&output.stdout).trim() == "0");
        let dir = std::env::temp_dir().join(format!(
            "idemgate-docs-pg-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let server = Postgres {
            bin,
            dir,
            as_postgres: root,
        };
        if root {
            let status = Command::new("chown")
                .args(["postgres:", server.dir.to_str().unwrap()])
                .status()
                .unwrap();
            assert!(status.success(), "chown postgres");
        }
        let data = server.dir.join("data");
        server
            .run(
                "initdb",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-A",
                    "trust",
                    "-U",
                    "postgres",
                    "--no-sync",
                    "-E",
                    "UTF8",
                ],
            )
            .expect("initdb");
        let options = format!("-k {} -c listen_addresses='' -F", server.dir.display());
        server
            .run(
                "pg_ctl",
                &[
                    "-D",
                    data.to_str().unwrap(),
                    "-o",
                    &options,
                    "-l",
                    server.dir.join("log").to_str().unwrap(),
                    "-w",
                    "start",
                ],
            )
            .unwrap_or_else(|error| {
                let log = std::fs::read_to_string(server.dir.join("log")).unwrap_or_default();
                panic!("pg_ctl start: {error}\n{log}")
            });
        server
    }

    fn command(&self, program: &str, args: &[&str]) -> Command {
        let program = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(program);
            command
        } else {
            Command::new(program)
        };
        command.args(args).current_dir(&self.dir);
        command
    }

    fn run(&self, program: &str, args: &[&str]) -> Result<String, String> {
        let output = self
            .command(program, args)
            .output()
            .map_err(|error| error.to_string())?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(format!(
                "{program}: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ))
        }
    }

    fn psql_args(&self) -> Vec<String> {
        [
            "-h",
            self.dir.to_str().unwrap(),
            "-U",
            "postgres",
            "-d",
            "postgres",
            "-X",
            "-q",
            "-A",
            "-t",
            "-v",
            "ON_ERROR_STOP=1",
        ]
        .map(String::from)
        .to_vec()
    }

    /// Runs SQL given on standard input; its output, unaligned.
    fn psql(&self, sql: &str) -> String {
        let args = self.psql_args();
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let mut child = self
            .command("psql", &args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(sql.as_bytes())
            .unwrap();
        let output = child.wait_with_output().unwrap();
        assert!(
            output.status.success(),
            "psql: {}\n{sql}",
            String::from_utf8_lossy(&output.stderr)
        );
        String::from_utf8_lossy(&output.stdout).trim().to_string()
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = self
            .command(
                "pg_ctl",
                &["-D", data.to_str().unwrap(), "-m", "immediate", "stop"],
            )
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `outcome|payment` of one call of `charge`.
fn charge(
    server: &Postgres,
    scope: &str,
    key: &str,
    epoch: u64,
    body: &str,
    amount: u64,
) -> (String, serde_json::Value) {
    let line = server.psql(&format!(
        "SELECT outcome, payment FROM charge('{scope}', '{key}', {epoch}, '{body}', {amount});"
    ));
    parse_charge(&line)
}

fn parse_charge(line: &str) -> (String, serde_json::Value) {
    let (outcome, payment) = line.split_once('|').unwrap_or((line, ""));
    let payment = match payment {
        "" => serde_json::Value::Null,
        text => serde_json::from_str(text).unwrap(),
    };
    (outcome.to_string(), payment)
}

#[test]
fn the_postgresql_fence_charges_each_scope_and_key_once() {
    let sql: Vec<String> = blocks("docs/origin.md")
        .into_iter()
        .filter(|block| block.directive == Directive::Postgresql)
        .map(|block| block.code)
        .collect();
    assert_eq!(sql.len(), 2, "the tables and the function");
    let server = Postgres::start();
    server.psql(&sql.join("\n"));
    let (scope, other_scope) = ("a".repeat(64), "b".repeat(64));

    let (outcome, first) = charge(&server, &scope, "order-1", 100, "h1", 1000);
    assert_eq!(outcome, "created");
    assert_eq!(first["amount"], 1000);
    // A retry (higher epoch, same body): the first payment, nothing charged.
    assert_eq!(
        charge(&server, &scope, "order-1", 200, "h1", 1000),
        ("repeated".to_string(), first.clone())
    );
    // The forward the retry superseded, arriving late: refused.
    assert_eq!(
        charge(&server, &scope, "order-1", 150, "h1", 1000).0,
        "stale-epoch"
    );
    // Another body under the key: refused, even with a higher epoch.
    assert_eq!(
        charge(&server, &scope, "order-1", 300, "h2", 9999).0,
        "body-mismatch"
    );
    // The same key in another scope (tenant, path) is its own payment.
    let (outcome, other) = charge(&server, &other_scope, "order-1", 100, "h1", 5);
    assert_eq!(outcome, "created");
    assert_ne!(other["payment_id"], first["payment_id"]);
    assert_eq!(
        server.psql("SELECT count(*) FROM payments WHERE idempotency_key = 'order-1';"),
        "2"
    );

    // Two forwards of one key in concurrent transactions: the second waits
    // for the first to commit, then sees its payment.
    let mut slow = server
        .command(
            "psql",
            &server
                .psql_args()
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = slow.stdin.take().unwrap();
        stdin
            .write_all(
                format!(
                    "BEGIN;\nSELECT outcome, payment FROM charge('{scope}', 'order-2', 10, 'h', 7);\nSELECT pg_sleep(1.5);\nCOMMIT;\n"
                )
                .as_bytes(),
            )
            .unwrap();
    }
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let (second, second_payment) = charge(&server, &scope, "order-2", 11, "h", 7);
    let waited = started.elapsed();
    let output = slow.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let first_line = String::from_utf8_lossy(&output.stdout)
        .lines()
        .find(|line| !line.trim().is_empty())
        .unwrap()
        .to_string();
    let (first, first_payment) = parse_charge(&first_line);
    match (first.as_str(), second.as_str()) {
        // As scheduled: the second waited on the first's lock.
        ("created", "repeated") => {
            assert_eq!(first_payment, second_payment);
            assert!(waited >= Duration::from_millis(500), "{waited:?}");
        }
        // The machine was slow to start the first: the second charged, and
        // the first, lower epoch, was refused.
        ("stale-epoch", "created") => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(
        server.psql("SELECT count(*) FROM payments WHERE idempotency_key = 'order-2';"),
        "1"
    );
}
