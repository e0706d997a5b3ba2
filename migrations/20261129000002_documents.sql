-- Documents and what the pipeline makes of them: chunks of text, and per model version a set
-- of embeddings. Every output is keyed so that rerunning a step overwrites instead of
-- duplicating: chunks by (document, index), embeddings by (document, model version, index).

create extension if not exists vector;

-- Keeps updated_at honest on every table that has one.
create function set_updated_at() returns trigger
language plpgsql
as $$
begin
    new.updated_at := now();
    return new;
end
$$;

create table documents (
    id bigint generated always as identity,
    -- As the uploader named it; shown as text, never used as a path.
    filename text not null,
    -- Judged from the bytes, not the name.
    content_type text not null,
    byte_size bigint not null,
    sha256 bytea not null,
    status text not null default 'uploaded',
    -- The readable reason of a failed step: { "code", "message" }.
    error jsonb,
    -- Which extractor produced the text (pdf-extract, pdftotext, html, text).
    extractor text,
    page_count integer,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),

    constraint documents_pkey primary key (id),
    -- Same bytes, same document: a second upload returns the first.
    constraint documents_sha256_key unique (sha256),
    constraint documents_status_check
        check (status in ('uploaded', 'extracting', 'embedding', 'ready', 'failed')),
    constraint documents_filename_check check (length(filename) between 1 and 1024)
);

create index documents_status_idx on documents (status, id);

create trigger documents_updated_at before update on documents
    for each row execute function set_updated_at();

-- The original upload, apart from the row people list, so listing never drags bytes along.
create table document_blobs (
    document_id bigint not null,
    bytes bytea not null,

    constraint document_blobs_pkey primary key (document_id),
    constraint document_blobs_document_fkey foreign key (document_id)
        references documents (id) on delete cascade
);

create table chunks (
    document_id bigint not null,
    chunk_index integer not null,
    page integer not null,
    text text not null,
    token_count integer not null,
    -- sha256 of the text: the same text under the same model never needs embedding twice.
    content_hash bytea not null,

    constraint chunks_pkey primary key (document_id, chunk_index),
    constraint chunks_document_fkey foreign key (document_id)
        references documents (id) on delete cascade
);

create index chunks_content_hash_idx on chunks (content_hash);

-- A model version names everything that changes the vectors: provider, model, dimensions and
-- chunking settings. Exactly one is active: the one search uses.
create table embedding_models (
    model_version text not null,
    provider text not null,
    model text not null,
    dims integer not null,
    chunk_tokens integer not null,
    chunk_overlap integer not null,
    active boolean not null default false,
    created_at timestamptz not null default now(),

    constraint embedding_models_pkey primary key (model_version),
    constraint embedding_models_dims_check check (dims between 1 and 16000)
);

create unique index embedding_models_one_active_idx on embedding_models (active) where active;

-- One row per document and model version; completed_at is set when every chunk has a vector.
create table embedding_sets (
    document_id bigint not null,
    model_version text not null,
    chunk_count integer not null,
    completed_at timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),

    constraint embedding_sets_pkey primary key (document_id, model_version),
    constraint embedding_sets_document_fkey foreign key (document_id)
        references documents (id) on delete cascade,
    constraint embedding_sets_model_fkey foreign key (model_version)
        references embedding_models (model_version)
);

create trigger embedding_sets_updated_at before update on embedding_sets
    for each row execute function set_updated_at();

-- Vectors of every model in one table with an untyped vector column; each model version gets
-- its own partial expression HNSW index (created by the application when the version is
-- registered, since its dimensions are known only then).
create table embeddings (
    document_id bigint not null,
    model_version text not null,
    chunk_index integer not null,
    embedding vector not null,

    constraint embeddings_pkey primary key (document_id, model_version, chunk_index),
    constraint embeddings_chunk_fkey foreign key (document_id, chunk_index)
        references chunks (document_id, chunk_index) on delete cascade,
    constraint embeddings_model_fkey foreign key (model_version)
        references embedding_models (model_version)
);

-- A document's page lists its jobs; the queue itself knows no kinds, so this lookup index is
-- the pipeline's, limited to jobs that name a document.
create index jobs_document_idx on jobs (((payload ->> 'document_id')::bigint))
    where payload ? 'document_id';
