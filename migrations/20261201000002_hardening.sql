-- Hardening: no document is left showing a step in progress once that step's job has ended, and
-- a person's retry of a dead job cannot grow its attempt budget without bound.

-- The attempt budget a job started with. `retry_dead` gives a dead job this many attempts more
-- (not `max_attempts` more, which doubled the budget on every retry until it overflowed int4).
-- Null until the first retry, which records it from `max_attempts` (still the original then).
alter table jobs add column attempt_budget integer;

alter table jobs add constraint jobs_attempt_budget_check
    check (attempt_budget is null or attempt_budget >= 1);

-- Settles a document after its extract or embed job `job_id` failed for good (`code`, `message`
-- say why), unless something else now speaks for the document:
--
-- - extract: only a document still `uploaded` or `extracting`, and only when no other extract
--   job of it is waiting or running (a reprocess enqueued a newer one);
-- - embed: only a document still `embedding`, and only when no other embed job of it is waiting
--   or running. A document that is searchable under some version (a complete set for its current
--   chunks) becomes `ready`, not `failed`: a failed embed under one version must not fail a
--   document people can find.
--
-- Returns whether the document changed. The pipeline calls it with its own readable reasons;
-- the trigger below calls it for every other way a job ends (rescued past its last attempt,
-- cancelled by a person, a handler that panicked on its last attempt), in the same transaction.
create function docket_settle_failed_step(
    doc bigint, job_id bigint, step text, code text, message text)
returns boolean
language plpgsql
as $$
declare
    searchable boolean;
    changed integer;
begin
    if exists (
        select 1 from jobs j
        where j.kind = step
          and j.status in ('ready', 'running')
          and j.id <> job_id
          and j.payload ? 'document_id'
          and (j.payload ->> 'document_id')::bigint = doc) then
        return false;
    end if;
    if step = 'extract' then
        update documents
        set status = 'failed', error = jsonb_build_object('code', code, 'message', message)
        where id = doc and status in ('uploaded', 'extracting');
    elsif step = 'embed' then
        searchable := exists (select 1 from embedding_sets_complete s where s.document_id = doc);
        update documents
        set status = case when searchable then 'ready' else 'failed' end,
            error = case when searchable then null
                         else jsonb_build_object('code', code, 'message', message) end
        where id = doc and status = 'embedding';
    else
        return false;
    end if;
    get diagnostics changed = row_count;
    return changed > 0;
end
$$;

create function docket_settle_document() returns trigger
language plpgsql
as $$
begin
    if new.status = 'cancelled' then
        perform docket_settle_failed_step(
            (new.payload ->> 'document_id')::bigint, new.id, new.kind, 'cancelled',
            'the ' || new.kind || ' job was cancelled'
                || coalesce(': ' || new.last_error, ''));
    else
        perform docket_settle_failed_step(
            (new.payload ->> 'document_id')::bigint, new.id, new.kind, 'retries_exhausted',
            'gave up after the last attempt: ' || coalesce(new.last_error, 'no error was recorded'));
    end if;
    return null;
end
$$;

-- Only pipeline jobs that name a document and reach a terminal failure pay for the call; every
-- other update of this hot table costs the WHEN comparison alone.
create trigger jobs_settle_document after update on jobs
    for each row
    when (old.status is distinct from new.status
          and new.status in ('dead', 'cancelled')
          and new.kind in ('extract', 'embed')
          and new.payload ? 'document_id')
    execute function docket_settle_document();
