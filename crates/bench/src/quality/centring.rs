//! `--fit-centring`: the per-script mean vectors of the ingested corpus, written as the Rust
//! table `docket::search::centring` reads (its module docs say why they exist).
//!
//! Every chunk vector of the model version whose first 400 characters are essentially in one
//! script ([`PURE`], by `centring::mixture`, as search weighs them) is averaged with the others
//! of that script; a script with fewer than
//! [`MIN_CHUNKS`] chunks gets no mean, since a mean of a handful of chunks is their topic, not
//! their language.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context;
use pgvector::Vector;

use docket::analysis::Script;
use docket::search::centring;

/// The least share of its letters a chunk must have in one script to count for that script.
const PURE: f32 = 0.9;
/// Fewest chunks of a script for its mean to be kept.
pub const MIN_CHUNKS: usize = 50;

/// Averages the vectors of `model_version` by script and writes the table for the model ids
/// containing `key` to `path`; returns the chunk count per script kept.
pub async fn fit(
    pool: &sqlx::PgPool,
    model_version: &str,
    key: &str,
    path: &Path,
) -> anyhow::Result<Vec<(Script, usize)>> {
    let rows: Vec<(Vector, String)> = sqlx::query_as(
        "select e.embedding, left(c.text, 400)
         from embeddings e
         join chunks c using (document_id, chunk_index)
         where e.model_version = $1",
    )
    .bind(model_version)
    .fetch_all(pool)
    .await?;
    let mut sums: Vec<(Script, Vec<f64>, usize)> = Vec::new();
    for (vector, start) in rows {
        // Only chunks in essentially one script: a mixed chunk's vector would blur the means.
        let Some(&(script, share)) = centring::mixture(&start).first() else {
            continue;
        };
        if share < PURE {
            continue;
        }
        let at = match sums.iter().position(|(s, _, _)| *s == script) {
            Some(at) => at,
            None => {
                sums.push((script, vec![0.0; vector.as_slice().len()], 0));
                sums.len() - 1
            }
        };
        let (_, sum, count) = &mut sums[at];
        if sum.len() != vector.as_slice().len() {
            anyhow::bail!("vectors of two lengths under {model_version}");
        }
        for (s, v) in sum.iter_mut().zip(vector.as_slice()) {
            *s += f64::from(*v);
        }
        *count += 1;
    }
    sums.retain(|(script, _, count)| *count >= MIN_CHUNKS && *script != Script::Other);
    sums.sort_by_key(|(script, _, _)| format!("{script:?}"));
    let mut out = String::from(
        "//! Per-script mean vectors by embedding model, written by `docket bench search-quality\n\
         //! --fit-centring` (see the parent module). Not edited by hand.\n\n\
         use crate::analysis::Script;\n\n",
    );
    let mut entries = String::new();
    for (script, sum, count) in &sums {
        let name = format!("{key}_{script:?}")
            .to_uppercase()
            .replace(|c: char| !c.is_ascii_alphanumeric(), "_");
        writeln!(
            out,
            "/// {script:?}: the mean of {count} chunk vectors of {model_version}."
        )?;
        writeln!(out, "#[rustfmt::skip]")?;
        write!(out, "const {name}: &[f32] = &[")?;
        for (at, s) in sum.iter().enumerate() {
            if at % 8 == 0 {
                out.push_str("\n   ");
            }
            write!(out, " {:.5},", s / *count as f64)?;
        }
        out.push_str("\n];\n\n");
        writeln!(entries, "            (Script::{script:?}, {name}),")?;
    }
    writeln!(
        out,
        "/// By a part of the model id they apply to, each script's mean vector.\n\
         pub(super) const FITTED: &[(&str, super::Means)] = &[\n    (\n        {key:?},\n        &[\n{entries}        ],\n    ),\n];"
    )?;
    std::fs::write(path, out).with_context(|| format!("writing {}", path.display()))?;
    Ok(sums.into_iter().map(|(s, _, n)| (s, n)).collect())
}
