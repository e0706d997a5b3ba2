-- Vectors by what they depend on: the model version and the SHA-256 of the exact text sent
-- (a chunk's content_hash). The embed step takes a vector from here before it calls the
-- provider and puts every vector it pays for here, so repeated text (boilerplate in every
-- document, a new version of a contract, the same file in two collections, a reprocess) is
-- embedded once per version. Owned by `embed::cache`; bounded by DOCKET_EMBEDDING_CACHE_ENTRIES,
-- least recently used first out (the maintenance loop evicts in batches).
create table embedding_cache (
    model_version text not null,
    text_sha256 bytea not null,
    embedding vector not null,
    -- The text's tokens, for docket_embedding_cache_tokens_saved_total.
    token_count integer not null,
    last_used timestamptz not null default now(),

    constraint embedding_cache_pkey primary key (model_version, text_sha256),
    constraint embedding_cache_model_fkey foreign key (model_version)
        references embedding_models (model_version) on delete cascade
);

create index embedding_cache_last_used_idx on embedding_cache (last_used);

-- The vectors already paid for, once per text and version.
insert into embedding_cache (model_version, text_sha256, embedding, token_count)
select distinct on (e.model_version, c.content_hash)
       e.model_version, c.content_hash, e.embedding, c.token_count
from embeddings e
join chunks c on c.document_id = e.document_id and c.chunk_index = e.chunk_index
order by e.model_version, c.content_hash
on conflict do nothing;
