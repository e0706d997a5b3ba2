//! `docket search`: one search from the command line, embedding the query with the configured
//! embedder, printed as a table or as the JSON of `GET /api/search`.

use anyhow::Context;

use crate::config::{DatabaseConfig, PipelineSettings};
use crate::search::{Mode, SearchRequest, SearchResults, Searcher};

#[derive(Debug, clap::Args)]
pub(super) struct SearchArgs {
    /// What to look for (web-search syntax: "a phrase", -excluded, or).
    query: String,
    /// How many hits.
    #[arg(short, long, default_value_t = crate::search::DEFAULT_K)]
    k: i64,
    /// hybrid, vector or text.
    #[arg(long, default_value = "hybrid")]
    mode: String,
    /// Only this document.
    #[arg(long)]
    document: Option<i64>,
    /// Only this collection (repeatable); every collection when absent.
    #[arg(long = "collection", value_name = "NAME")]
    collections: Vec<String>,
    /// Search this model version instead of the active one.
    #[arg(long)]
    model_version: Option<String>,
    /// Only hits at least this relevant (0 to 1; 0 shows every hit); the default leaves out
    /// the least relevant.
    #[arg(long)]
    min_relevance: Option<f64>,
    /// Print the results as JSON (the shape of GET /api/search).
    #[arg(long)]
    json: bool,
    #[command(flatten)]
    database: DatabaseConfig,
    #[command(flatten)]
    pipeline: PipelineSettings,
}

/// Runs `docket search`.
pub(super) async fn run(args: SearchArgs) -> anyhow::Result<()> {
    let mode = Mode::parse(&args.mode).with_context(|| {
        format!(
            "unknown mode {:?}; expected hybrid, vector or text",
            args.mode
        )
    })?;
    let pool = crate::db::connect(&args.database.database_url, args.database.db_pool).await?;
    let embedder = crate::app::EmbedderChoice::of(&args.pipeline).embedder(&args.pipeline)?;
    let model = crate::models::ModelVersion::of(&embedder, &args.pipeline.chunking());
    // The operator's command line reaches every collection.
    let collections = crate::access::Access::admin()
        .reach(&pool, &args.collections)
        .await?;
    let searcher = Searcher::new(pool, embedder, model);
    let results = searcher
        .search(&SearchRequest {
            query: args.query,
            k: args.k,
            mode,
            document: args.document.map(crate::documents::DocumentId),
            collections,
            model_version: args.model_version,
            group: false,
            min_relevance: args.min_relevance,
        })
        .await?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&results).context("rendering the results")?
        );
        return Ok(());
    }
    print_table(&results);
    Ok(())
}

/// The results as people read them: a heading, then each hit and its snippet on one line.
fn print_table(results: &SearchResults) {
    let version = results.model_version.as_deref().unwrap_or("none");
    let note = if results.semantic {
        ""
    } else {
        ", not semantic"
    };
    println!(
        "{} hits ({:?}, model {version}{note})",
        results.hits.len(),
        results.mode
    );
    if results.no_good_match {
        println!("     no good match: no hit is likely to answer (relevance 0.5 or more)");
    }
    // During a model switch: which older versions answered, and which could not.
    for other in results.versions.iter().skip(1) {
        match (&other.reason, other.documents) {
            (Some(reason), _) => println!("     {} not searched: {reason}", other.model_version),
            (None, Some(n)) => println!("     {n} documents read under {}", other.model_version),
            (None, None) => {}
        }
    }
    for (rank, hit) in results.hits.iter().enumerate() {
        println!(
            "{:>3}. relevance {:.2}  {} p.{} #{} (document {})",
            rank + 1,
            hit.relevance,
            hit.filename,
            hit.page,
            hit.chunk_index,
            hit.document_id
        );
        println!(
            "     {}",
            hit.snippet.split_whitespace().collect::<Vec<_>>().join(" ")
        );
    }
}
