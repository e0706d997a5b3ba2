//! Turns the paths given to `docket ingest` into the list of files to send.
//!
//! Folders are walked recursively in name order (so runs are repeatable); hidden entries
//! (names starting with `.`) inside a folder are skipped, because they are editor swap files,
//! VCS metadata and the like, never documents someone meant to upload. A path named on the
//! command line is taken even when hidden: the person asked for it. Symbolic links to files
//! are followed; links to folders are not, so a link cycle cannot make the walk endless.

use std::path::{Path, PathBuf};

/// A regular file found on disk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalFile {
    /// Where the file is, as reached from the given path.
    pub path: PathBuf,
    /// Its size when listed (the upload streams whatever is there when it is read).
    pub size: u64,
}

/// A path that cannot be sent, with a stable code and a readable reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreadable {
    /// The path as found.
    pub path: PathBuf,
    /// `not_found`, `unreadable` or `not_a_file`.
    pub code: &'static str,
    /// What went wrong.
    pub message: String,
}

/// Everything under `paths`: the files to send and the paths that could not be read.
pub fn collect(paths: &[PathBuf]) -> (Vec<LocalFile>, Vec<Unreadable>) {
    let mut files = Vec::new();
    let mut problems = Vec::new();
    for path in paths {
        match std::fs::metadata(path) {
            Ok(meta) if meta.is_dir() => walk_dir(path, &mut files, &mut problems),
            Ok(meta) if meta.is_file() => files.push(LocalFile {
                path: path.clone(),
                size: meta.len(),
            }),
            Ok(_) => problems.push(Unreadable {
                path: path.clone(),
                code: "not_a_file",
                message: "neither a regular file nor a folder".into(),
            }),
            Err(err) => problems.push(io_problem(path, &err)),
        }
    }
    (files, problems)
}

fn walk_dir(dir: &Path, files: &mut Vec<LocalFile>, problems: &mut Vec<Unreadable>) {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            problems.push(io_problem(dir, &err));
            return;
        }
    };
    let mut children: Vec<PathBuf> = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) if is_hidden(&entry.file_name()) => {}
            Ok(entry) => children.push(entry.path()),
            Err(err) => problems.push(io_problem(dir, &err)),
        }
    }
    children.sort();
    for child in children {
        let link = std::fs::symlink_metadata(&child).map(|m| m.file_type().is_symlink());
        match std::fs::metadata(&child) {
            Ok(meta) if meta.is_dir() => {
                if !matches!(link, Ok(true)) {
                    walk_dir(&child, files, problems);
                }
            }
            Ok(meta) if meta.is_file() => files.push(LocalFile {
                path: child,
                size: meta.len(),
            }),
            // Sockets, FIFOs and devices in a folder are not documents; skip them quietly.
            Ok(_) => {}
            Err(err) => problems.push(io_problem(&child, &err)),
        }
    }
}

fn is_hidden(name: &std::ffi::OsStr) -> bool {
    name.as_encoded_bytes().first() == Some(&b'.')
}

fn io_problem(path: &Path, err: &std::io::Error) -> Unreadable {
    let code = if err.kind() == std::io::ErrorKind::NotFound {
        "not_found"
    } else {
        "unreadable"
    };
    Unreadable {
        path: path.to_path_buf(),
        code,
        message: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_are_walked_in_order_without_hidden_entries() {
        let root = tempfile::tempdir().expect("temp dir");
        let base = root.path();
        std::fs::create_dir_all(base.join("b/deeper")).expect("dirs");
        std::fs::create_dir_all(base.join(".git")).expect("dirs");
        std::fs::write(base.join("b/deeper/z.txt"), "z").expect("write");
        std::fs::write(base.join("a.txt"), "aa").expect("write");
        std::fs::write(base.join(".hidden.txt"), "h").expect("write");
        std::fs::write(base.join(".git/config"), "c").expect("write");
        let (files, problems) = collect(&[base.to_path_buf()]);
        assert!(problems.is_empty(), "{problems:?}");
        let found: Vec<(PathBuf, u64)> = files.into_iter().map(|f| (f.path, f.size)).collect();
        assert_eq!(
            found,
            vec![(base.join("a.txt"), 2), (base.join("b/deeper/z.txt"), 1)]
        );
    }

    #[test]
    fn a_hidden_file_named_explicitly_is_taken_and_a_missing_one_is_reported() {
        let root = tempfile::tempdir().expect("temp dir");
        let hidden = root.path().join(".notes.md");
        std::fs::write(&hidden, "# notes").expect("write");
        let missing = root.path().join("missing.pdf");
        let (files, problems) = collect(&[hidden.clone(), missing.clone()]);
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].path, hidden);
        assert_eq!(problems.len(), 1);
        assert_eq!(problems[0].path, missing);
        assert_eq!(problems[0].code, "not_found");
    }

    #[test]
    fn a_folder_link_cycle_does_not_loop() {
        let root = tempfile::tempdir().expect("temp dir");
        std::fs::write(root.path().join("doc.txt"), "text").expect("write");
        std::os::unix::fs::symlink(root.path(), root.path().join("loop")).expect("symlink");
        let (files, problems) = collect(&[root.path().to_path_buf()]);
        assert!(problems.is_empty(), "{problems:?}");
        assert_eq!(files.len(), 1);
    }
}
