-- Ranked keyword search: BM25 over postings that docket's own text analysis writes.
--
-- Why not the tsvector column it replaces: `websearch_to_tsquery` ANDs every word, so natural
-- questions matched nothing, and `ts_rank_cd` has no document frequencies, so rare words could
-- not outrank common ones. BM25 needs, per query term, the chunks holding it with the term's
-- frequency and the chunk's length: `chunk_terms` is exactly that, one row per (term, chunk).
-- Document frequencies live in `term_stats`, kept exact by triggers in the same transactions.
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
    -- BM25's term-frequency factor at a typical chunk length (100 terms): the order in which a
    -- term's postings are worth reading. Search reads the best postings of each query term first
    -- and scores its candidates exactly afterwards, so a term held by half the chunks costs a
    -- bounded read instead of all of them.
    impact real generated always as (tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / 100.0))) stored,
    -- Also serves deleting a document's postings and the exact scoring of a candidate chunk.
    constraint chunk_terms_pkey primary key (document_id, chunk_index, term),
    constraint chunk_terms_document_fkey foreign key (document_id)
        references documents (id) on delete cascade
);

create index chunk_terms_impact_idx on chunk_terms (term, impact desc)
    include (document_id, chunk_index, tf, length);

-- Document frequencies, kept by the database itself: every statement that adds or removes
-- postings adjusts them, whoever runs it (the extract step, a cascade from a deleted document,
-- the background indexer). Rows are changed in term order, so concurrent extractions wait for
-- each other on shared terms instead of deadlocking (a reprocess, which removes then adds in
-- one transaction, can still meet another in a deadlock that PostgreSQL breaks by failing one;
-- its job is retried).
create table term_stats (
    term text not null,
    chunks int not null,
    constraint term_stats_pkey primary key (term)
);

create function docket_count_terms() returns trigger
language plpgsql
as $$
begin
    if tg_op = 'INSERT' then
        insert into term_stats (term, chunks)
        select term, count(*) from new_postings group by term order by term
        on conflict (term) do update set chunks = term_stats.chunks + excluded.chunks;
    else
        update term_stats s
        set chunks = s.chunks - gone.n
        from (select term, count(*) as n from old_postings group by term order by term) gone
        where s.term = gone.term;
    end if;
    return null;
end
$$;

create trigger chunk_terms_counted_insert after insert on chunk_terms
    referencing new table as new_postings
    for each statement execute function docket_count_terms();

create trigger chunk_terms_counted_delete after delete on chunk_terms
    referencing old table as old_postings
    for each statement execute function docket_count_terms();
