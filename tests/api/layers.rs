//! The layering that `src/lib.rs` and docs/ARCHITECTURE.md §2 describe, checked on the sources:
//! every module of the product crate names only modules below it, so no arrow runs up a layer
//! or round a circle. Comments may point anywhere (a doc link is not a dependency).

use std::path::{Path, PathBuf};

/// The product crate's modules, from the bottom up: each may use only those before it.
const LAYERS: &[&str] = &[
    "analysis",
    "extract",
    "chunk",
    "db",
    "queue",
    "listen",
    "metrics",
    "worker",
    "embed",
    "models",
    "collections",
    "access",
    "documents",
    "webhooks",
    "search",
    "maintenance",
    "schedule",
    "pipeline",
    "http",
    "ingest",
    "config",
    "app",
    "cli",
];

fn rust_files(dir: &Path, into: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            rust_files(&path, into);
        } else if path.extension().is_some_and(|e| e == "rs") {
            into.push(path);
        }
    }
}

/// The top-level module a file of src/ belongs to (`src/queue/claim.rs` → `queue`).
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("under src/");
    let first = relative.components().next().expect("a path");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_owned()
}

/// The modules `code` names through `crate::…`, with grouped imports (`crate::{a, b::c}`)
/// read element by element.
fn named_modules(code: &str) -> Vec<String> {
    let ident = |s: &str| -> String {
        s.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect()
    };
    let mut found = Vec::new();
    for (at, _) in code.match_indices("crate::") {
        let rest = &code[at + "crate::".len()..];
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut element_start = true;
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => element_start = true,
                    c if element_start && !c.is_whitespace() => {
                        found.push(ident(&group[i..]));
                        element_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            found.push(ident(rest));
        }
    }
    found
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let rank = |module: &str| LAYERS.iter().position(|m| *m == module);
    let mut wrong = Vec::new();
    for file in &files {
        let module = module_of(&src, file);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = rank(&module) else {
            wrong.push(format!(
                "{module} ({}) is missing from LAYERS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).expect("read a source file");
        let code: String = text
            .lines()
            .filter(|line| !line.trim_start().starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n");
        for used in named_modules(&code) {
            match rank(&used) {
                Some(other) if other < own || used == module => {}
                Some(_) => wrong.push(format!(
                    "{} uses crate::{used}, which is not below {module}",
                    file.strip_prefix(&src).unwrap_or(file).display()
                )),
                None if used == "self" || used == "super" => {}
                None => wrong.push(format!(
                    "{} uses crate::{used}, which is not in LAYERS",
                    file.strip_prefix(&src).unwrap_or(file).display()
                )),
            }
        }
    }
    wrong.sort();
    wrong.dedup();
    assert!(
        wrong.is_empty(),
        "arrows that do not run down:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn grouped_imports_name_each_module() {
    let code = "use crate::{\n    embed::{Embedder, Limiter},\n    queue::Queue,\n};\nlet x = crate::models::get();";
    assert_eq!(named_modules(code), ["embed", "queue", "models"]);
}
