//! Model versions: which embedder, model, dimensions and chunking produced a set of vectors.
//!
//! A model version is registered once (a row in `embedding_models` and its own partial HNSW
//! index over `embeddings`), and exactly one is active: the one search uses. Vectors of
//! different versions never mix, because every query and index is filtered by the version.
//!
//! Switching: [`switch_to`] flips `active`, but search reads each document under the version
//! named by the `document_search_versions` view: the active one once the document's set under
//! it is complete, otherwise its newest complete set. The nightly `reembed` job fills the new
//! sets; [`list`] shows how far each version has come.

use sha2::{Digest, Sha256};
use sqlx::PgPool;

use crate::chunk::ChunkConfig;
use crate::embed::{Embedder, HashEmbedder};

/// Everything that changes the vectors, and the name that stands for it.
#[derive(utoipa::ToSchema, Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ModelVersion {
    /// `<provider>:<model>:<dims>:c<chunk tokens>o<overlap>`, e.g. `hash:v1:384:c200o30`.
    pub model_version: String,
    pub provider: String,
    pub model: String,
    pub dims: i32,
    pub chunk_tokens: i32,
    pub chunk_overlap: i32,
}

impl ModelVersion {
    /// The version that `embedder` with `chunking` produces.
    pub fn of(embedder: &Embedder, chunking: &ChunkConfig) -> Self {
        let model_id = embedder.model_id();
        let provider = embedder.provider_label().to_owned();
        // model_id is provider:model:dims; the model is what lies between.
        let model = model_id
            .strip_prefix(&format!("{provider}:"))
            .and_then(|rest| rest.rsplit_once(':').map(|(model, _)| model.to_owned()))
            .unwrap_or_else(|| model_id.clone());
        ModelVersion {
            model_version: format!(
                "{model_id}:c{}o{}",
                chunking.target_tokens, chunking.overlap_tokens
            ),
            provider,
            model,
            dims: i32::try_from(embedder.dims()).unwrap_or(i32::MAX),
            chunk_tokens: i32::try_from(chunking.target_tokens).unwrap_or(i32::MAX),
            chunk_overlap: i32::try_from(chunking.overlap_tokens).unwrap_or(i32::MAX),
        }
    }

    /// `<provider>:<model>:<dims>`: what embeds one text, without the chunking.
    pub fn model_id(&self) -> String {
        format!("{}:{}:{}", self.provider, self.model, self.dims)
    }

    /// The name of this version's HNSW index: stable, short, and a valid identifier whatever
    /// characters the version holds.
    pub fn index_name(&self) -> String {
        let digest = Sha256::digest(self.model_version.as_bytes());
        format!("embeddings_hnsw_{}", &hex::encode(digest)[..16])
    }
}

/// The embedder that produces `version`'s vectors in a process whose own embedder is `own`, if
/// one can be built here: `own` when it is the version's provider, model and dimensions, the
/// previous default local model when `own` carries it ([`crate::embed::LocalEmbedder::previous`]),
/// and any `hash:v1` version, since hashing needs no configuration. API keys, URLs and model files
/// are configuration, never stored, so every other version needs a process configured for it.
/// Chunking is not looked at: it shapes the stored chunks, not how one text is embedded (the
/// pipeline, which writes chunks, checks it itself).
pub fn embedder_for(version: &ModelVersion, own: &Embedder) -> Option<Embedder> {
    if own.model_id() == version.model_id() {
        return Some(own.clone());
    }
    // A local model loaded beside ours because it was docket's previous default.
    if let Embedder::Local(local) = own
        && let Some(previous) = local.previous()
        && previous.model_id() == version.model_id()
    {
        return Some(Embedder::Local(previous.clone()));
    }
    let dims = usize::try_from(version.dims).ok().filter(|d| *d > 0)?;
    (version.provider == "hash" && version.model == "v1")
        .then(|| Embedder::Hash(HashEmbedder::new(dims)))
}

/// Registers `version` (idempotent) and builds its HNSW index if missing.
pub async fn register(pool: &PgPool, version: &ModelVersion) -> Result<(), sqlx::Error> {
    sqlx::query!(
        "insert into embedding_models
             (model_version, provider, model, dims, chunk_tokens, chunk_overlap)
         values ($1, $2, $3, $4, $5, $6)
         on conflict (model_version) do nothing",
        version.model_version,
        version.provider,
        version.model,
        version.dims,
        version.chunk_tokens,
        version.chunk_overlap,
    )
    .execute(pool)
    .await?;

    let mut conn = pool.acquire().await?;
    // pgvector before 0.8.2 can overflow when building HNSW in parallel: build serially.
    sqlx::query!("set max_parallel_maintenance_workers = 0")
        .execute(&mut *conn)
        .await?;
    // DDL takes no bind parameters; PostgreSQL's own format() quotes the identifier (%I) and
    // the literal (%L), so the statement is safe whatever the version's characters.
    let ddl = sqlx::query_scalar!(
        r#"select format(
               'create index if not exists %I on embeddings
                using hnsw ((embedding::vector(%s)) vector_cosine_ops)
                where model_version = %L',
               $1::text, $2::int, $3::text) as "ddl!""#,
        version.index_name(),
        version.dims,
        version.model_version,
    )
    .fetch_one(&mut *conn)
    .await?;
    // Built at run time (per model version, above), so it cannot be checked at compile time.
    sqlx::query(sqlx::AssertSqlSafe(ddl))
        .execute(&mut *conn)
        .await?;
    sqlx::query!("reset max_parallel_maintenance_workers")
        .execute(&mut *conn)
        .await?;
    Ok(())
}

/// Makes `model_version` the one search uses.
pub async fn activate(pool: &PgPool, model_version: &str) -> Result<bool, sqlx::Error> {
    let mut tx = pool.begin().await?;
    sqlx::query!(
        "update embedding_models
         set active = false
         where active and model_version <> $1",
        model_version
    )
    .execute(&mut *tx)
    .await?;
    let found = sqlx::query!(
        "update embedding_models
         set active = true
         where model_version = $1",
        model_version
    )
    .execute(&mut *tx)
    .await?
    .rows_affected();
    tx.commit().await?;
    Ok(found == 1)
}

/// The active version, if any.
pub async fn active(pool: &PgPool) -> Result<Option<ModelVersion>, sqlx::Error> {
    sqlx::query_as!(
        ModelVersion,
        "select model_version, provider, model, dims, chunk_tokens, chunk_overlap
         from embedding_models
         where active"
    )
    .fetch_optional(pool)
    .await
}

/// Every registered version, in no particular order.
pub async fn all(pool: &PgPool) -> Result<Vec<ModelVersion>, sqlx::Error> {
    sqlx::query_as!(
        ModelVersion,
        "select model_version, provider, model, dims, chunk_tokens, chunk_overlap
         from embedding_models"
    )
    .fetch_all(pool)
    .await
}

/// One version, by name.
pub async fn get(pool: &PgPool, model_version: &str) -> Result<Option<ModelVersion>, sqlx::Error> {
    sqlx::query_as!(
        ModelVersion,
        "select model_version, provider, model, dims, chunk_tokens, chunk_overlap
         from embedding_models
         where model_version = $1",
        model_version
    )
    .fetch_optional(pool)
    .await
}

/// A version as people list it: whether it is active and how far its sets have come.
#[derive(utoipa::ToSchema, Debug, Clone, serde::Serialize)]
pub struct ModelVersionStatus {
    #[serde(flatten)]
    pub version: ModelVersion,
    pub active: bool,
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// Documents whose set under this version is complete.
    pub documents_complete: i64,
    /// Documents that have chunks (what a complete switch covers).
    pub documents_total: i64,
    /// Documents search currently reads under this version (`document_search_versions`).
    pub documents_searchable: i64,
}

/// Every version, the active one first, with the progress of its sets.
pub async fn list(pool: &PgPool) -> Result<Vec<ModelVersionStatus>, sqlx::Error> {
    let rows = sqlx::query!(
        r#"select m.model_version, m.provider, m.model, m.dims, m.chunk_tokens, m.chunk_overlap,
                  m.active, m.created_at,
                  (select count(*) from embedding_sets_complete c
                   where c.model_version = m.model_version) as "documents_complete!",
                  (select count(distinct document_id) from chunks) as "documents_total!",
                  (select count(*) from document_search_versions v
                   where v.model_version = m.model_version) as "documents_searchable!"
           from embedding_models m
           order by m.active desc, m.created_at, m.model_version"#
    )
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|row| ModelVersionStatus {
            version: ModelVersion {
                model_version: row.model_version,
                provider: row.provider,
                model: row.model,
                dims: row.dims,
                chunk_tokens: row.chunk_tokens,
                chunk_overlap: row.chunk_overlap,
            },
            active: row.active,
            created_at: row.created_at,
            documents_complete: row.documents_complete,
            documents_total: row.documents_total,
            documents_searchable: row.documents_searchable,
        })
        .collect())
}

/// Why a version cannot be added.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("{0}")]
    Invalid(String),
    #[error("model version {0} not found")]
    NotFound(String),
    #[error(transparent)]
    Database(#[from] sqlx::Error),
}

/// What names a new version.
#[derive(utoipa::ToSchema, Debug, Clone, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewModelVersion {
    /// `hash` or `openai`.
    pub provider: String,
    /// `v1` for hash; the API's model name for openai.
    pub model: String,
    pub dims: i32,
    pub chunk_tokens: i32,
    pub chunk_overlap: i32,
}

impl NewModelVersion {
    /// The version these settings name, if they make sense.
    pub fn version(&self) -> Result<ModelVersion, ModelError> {
        match self.provider.as_str() {
            "hash" if self.model == "v1" => {}
            "hash" => {
                return Err(ModelError::Invalid(
                    "the hash provider has one model, v1".into(),
                ));
            }
            "openai" if !self.model.is_empty() && !self.model.contains(':') => {}
            "openai" => {
                return Err(ModelError::Invalid(
                    "an openai model name is non-empty and has no ':'".into(),
                ));
            }
            other => {
                return Err(ModelError::Invalid(format!(
                    "unknown provider {other:?}; expected hash or openai"
                )));
            }
        }
        if !(1..=16_000).contains(&self.dims) {
            return Err(ModelError::Invalid("dims must be 1 to 16000".into()));
        }
        if self.chunk_tokens < 16 || !(0..self.chunk_tokens).contains(&self.chunk_overlap) {
            return Err(ModelError::Invalid(
                "chunk_tokens is at least 16 and larger than chunk_overlap (>= 0)".into(),
            ));
        }
        Ok(ModelVersion {
            model_version: format!(
                "{}:{}:{}:c{}o{}",
                self.provider, self.model, self.dims, self.chunk_tokens, self.chunk_overlap
            ),
            provider: self.provider.clone(),
            model: self.model.clone(),
            dims: self.dims,
            chunk_tokens: self.chunk_tokens,
            chunk_overlap: self.chunk_overlap,
        })
    }
}

/// Registers a new version (idempotent) without activating it.
pub async fn add(pool: &PgPool, new: &NewModelVersion) -> Result<ModelVersion, ModelError> {
    let version = new.version()?;
    register(pool, &version).await?;
    Ok(version)
}

/// Moves an installation across a change of docket's default local model, on the first start
/// of a process that runs the new default: when the active version was made by
/// `previous_model` (the old default), `own` becomes active. Search keeps reading each document
/// under its old version until its new set is complete, and the nightly reembed fills the sets.
/// Answers whether it switched. Any other active version (a model someone chose) is left alone.
pub async fn adopt_default(
    pool: &PgPool,
    own: &ModelVersion,
    previous_model: &str,
) -> Result<bool, ModelError> {
    let Some(active) = active(pool).await? else {
        return Ok(false);
    };
    let made_by_previous =
        active.provider == "local" && active.model.starts_with(&format!("{previous_model}-"));
    if !made_by_previous || active.model_version == own.model_version {
        return Ok(false);
    }
    switch_to(pool, &own.model_version).await?;
    Ok(true)
}

/// Activates a registered version: search keeps each document on its old version until the
/// new set is complete (`document_search_versions`); the nightly reembed fills the sets.
pub async fn switch_to(pool: &PgPool, model_version: &str) -> Result<ModelVersion, ModelError> {
    let version = get(pool, model_version)
        .await?
        .ok_or_else(|| ModelError::NotFound(model_version.to_owned()))?;
    if !activate(pool, model_version).await? {
        return Err(ModelError::NotFound(model_version.to_owned()));
    }
    Ok(version)
}
