-- Search and live events.
--
-- Full-text search: a generated tsvector column on chunks with a GIN index. The configuration
-- is 'simple' (lower-casing, no stemming, no stop words) on purpose: docket takes documents in
-- any language, and a language's stemmer (e.g. 'english') mangles words of every other language
-- and drops stop words that are ordinary words elsewhere. 'simple' matches whole words the same
-- way in every script that separates words with spaces (Latin, Cyrillic, Greek, Korean, ...).
-- Chinese and Japanese do not separate words, so the parser sees a whole run of CJK characters
-- as one word: for those, a pg_trgm GIN index on the text lets a substring match (ILIKE) find
-- them quickly; search.rs uses it as the second text signal.

create extension if not exists pg_trgm;

alter table chunks
    add column tsv tsvector generated always as (to_tsvector('simple'::regconfig, text)) stored;

create index chunks_tsv_idx on chunks using gin (tsv);

create index chunks_text_trgm_idx on chunks using gin (text gin_trgm_ops);

-- Live events: the page's document list and jobs view follow changes through server-sent
-- events. PostgreSQL tells every docket process about them with NOTIFY on one channel; each
-- process holds one LISTEN connection and fans the messages out to its browsers. Payloads are
-- small JSON (ids and states, never document text or file names), far below NOTIFY's 8000-byte
-- limit. A notification is delivered at commit, and identical ones in one transaction fold
-- into one.

create function docket_notify_document() returns trigger
language plpgsql
as $$
declare
    row_id bigint;
    row_status text;
begin
    if tg_op = 'DELETE' then
        row_id := old.id;
        row_status := null;
    else
        row_id := new.id;
        row_status := new.status;
    end if;
    perform pg_notify('docket_events', json_build_object(
        'type', 'document',
        'op', lower(tg_op),
        'id', row_id,
        'status', row_status)::text);
    return null;
end
$$;

-- Insert, delete, and updates that change the status (or the error beside it): other updates
-- (page_count, extractor) are not worth a message.
create trigger documents_notify_insert_delete after insert or delete on documents
    for each row execute function docket_notify_document();

create trigger documents_notify_status after update on documents
    for each row
    when (old.status is distinct from new.status or old.error is distinct from new.error)
    execute function docket_notify_document();

create function docket_notify_job() returns trigger
language plpgsql
as $$
begin
    perform pg_notify('docket_events', json_build_object(
        'type', 'job',
        'id', new.id,
        'kind', new.kind,
        'status', new.status,
        'attempts', new.attempts,
        'document_id', new.payload -> 'document_id')::text);
    return null;
end
$$;

-- jobs is the hot table: every claim, heartbeat and completion updates it. The WHEN clauses
-- are evaluated without calling the function, so only pipeline jobs (those that name a
-- document) changing status pay for a notification; heartbeats (lease_until only) and other
-- kinds (the queue benchmark's noop jobs) cost one comparison per row.
create trigger jobs_notify_insert after insert on jobs
    for each row
    when (new.payload ? 'document_id')
    execute function docket_notify_job();

create trigger jobs_notify_status after update on jobs
    for each row
    when (old.status is distinct from new.status and new.payload ? 'document_id')
    execute function docket_notify_job();
