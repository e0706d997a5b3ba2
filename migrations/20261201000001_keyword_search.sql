-- Ranked keyword search: BM25 over postings that docket's own text analysis writes.
--
-- Why not the tsvector column it replaces: `websearch_to_tsquery` ANDs every word, so natural
-- questions matched nothing, and `ts_rank_cd` has no document frequencies, so rare words could
-- not outrank common ones. BM25 needs, per query term, the chunks holding it with the term's
-- frequency and the chunk's length: `chunk_terms` is exactly that, one row per (term, chunk),
-- and the primary key carries `tf` and `length` so ranking reads the index alone (an
-- index-only scan over the query terms' postings, no chunk text). Document frequencies are
-- counted from those same postings at query time, so they are always exact and transactional
-- with no shared counter row for concurrent extractions to fight over.
--
-- The terms come from src/analysis (per-language stemming and stop words, CJK character
-- bigrams), which PostgreSQL's parsers cannot produce; chunks record the analysis they were
-- indexed with, and chunks with none (older rows, bulk loads) are indexed in the background.

alter table chunks
    add column language text,
    add column term_count int,
    add column analyzer smallint;

comment on column chunks.language is
    'the language its words were analysed under (ISO 639-1, or simple), for highlighting';
comment on column chunks.term_count is 'how many terms it holds: its length for BM25';
comment on column chunks.analyzer is
    'the analysis version that wrote its postings; null = not indexed for keyword search yet';

-- Finds chunks still to index (null) or indexed by an older analysis; deduplicated, it stays tiny.
create index chunks_analyzer_idx on chunks (analyzer);

drop index chunks_tsv_idx;
alter table chunks drop column tsv;

create table chunk_terms (
    term text not null,
    document_id bigint not null,
    chunk_index int not null,
    -- occurrences of the term in the chunk, and the chunk's length in terms (both capped at
    -- 32767; a chunk holds a few hundred terms)
    tf smallint not null,
    length smallint not null,
    constraint chunk_terms_pkey primary key (term, document_id, chunk_index) include (tf, length),
    constraint chunk_terms_document_fkey foreign key (document_id)
        references documents (id) on delete cascade
);

-- Deleting a document (cascade) or replacing its chunks finds their postings by document.
create index chunk_terms_document_idx on chunk_terms (document_id, chunk_index);
