-- Recurring schedules, and what the nightly re-embedding and search need to know about model
-- versions.
--
-- A schedule fires by enqueueing a job whose idempotency key is
-- `schedule:<name>:<logical time in UTC>` and moving `last_fired_for` in the same transaction:
-- the key makes a firing happen at most once whoever fires it (two in-app leaders, or the
-- in-app scheduler and pg_cron), and the cursor tells the next leader where to resume.

create table schedules (
    name text not null,
    -- Five fields: minute hour day-of-month month day-of-week.
    cron text not null,
    -- IANA name; the cron fields are read on this zone's wall clock.
    timezone text not null default 'UTC',
    -- The job each firing enqueues.
    kind text not null,
    payload jsonb not null default '{}'::jsonb,
    enabled boolean not null default true,
    -- Firings missed (downtime) no older than this are still enqueued; older ones are skipped.
    backfill_secs bigint not null default 86400,
    -- The logical time of the last firing; null until the first one. Firings are computed
    -- after coalesce(last_fired_for, created_at).
    last_fired_for timestamptz,
    created_at timestamptz not null default now(),
    updated_at timestamptz not null default now(),

    constraint schedules_pkey primary key (name),
    constraint schedules_name_check check (name ~ '^[a-z0-9][a-z0-9_.-]{0,62}$'),
    constraint schedules_kind_check check (kind <> '' and length(kind) <= 100),
    constraint schedules_backfill_check check (backfill_secs >= 60),
    constraint schedules_payload_check check (jsonb_typeof(payload) = 'object')
);

create trigger schedules_updated_at before update on schedules
    for each row execute function set_updated_at();

-- The idempotency key of a firing; the Rust scheduler formats the same string
-- (schedule::firing_key), so both paths collide on purpose.
create function docket_schedule_key(name text, logical timestamptz)
returns text
language sql
stable
as $$
    select 'schedule:' || name || ':'
        || to_char(logical at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"')
$$;

-- One firing, in SQL: what a pg_cron job runs (`docket schedule install-pg-cron`). It locks the
-- schedule row, enqueues with the firing's key (a no-op when the in-app scheduler already fired
-- it) and moves the cursor forward, never back. Returns the job id, or null when the schedule is
-- missing or disabled.
create function docket_fire_schedule(schedule_name text, logical timestamptz)
returns bigint
language plpgsql
as $$
declare
    s schedules;
    job_id bigint;
begin
    select * into s from schedules where name = schedule_name for update;
    if not found or not s.enabled then
        return null;
    end if;
    insert into jobs (kind, payload, idempotency_key)
    values (s.kind, s.payload, docket_schedule_key(s.name, logical))
    on conflict (idempotency_key) do nothing
    returning id into job_id;
    if job_id is not null then
        perform pg_notify('docket_jobs', s.kind);
    else
        select id into job_id from jobs where idempotency_key = docket_schedule_key(s.name, logical);
    end if;
    update schedules
    set last_fired_for = greatest(coalesce(last_fired_for, logical), logical)
    where name = schedule_name;
    return job_id;
end
$$;

-- A document's set under a version is complete when it has a vector for every current chunk.
-- Old sets whose chunks changed (a reprocess) are not complete any more.
create view embedding_sets_complete as
select s.document_id, s.model_version, s.completed_at
from embedding_sets s
where s.completed_at is not null
  and s.chunk_count = (select count(*) from chunks c where c.document_id = s.document_id)
  and s.chunk_count = (
      select count(*) from embeddings e
      where e.document_id = s.document_id and e.model_version = s.model_version);

-- The version search should use for each document: the active one once the document's set under
-- it is complete, otherwise the most recently completed other version. A switch of the active
-- version therefore moves each document over only when its new set is whole; documents with no
-- complete set are absent (not searchable yet).
create view document_search_versions as
select distinct on (c.document_id)
    c.document_id,
    c.model_version,
    m.active
from embedding_sets_complete c
join embedding_models m on m.model_version = c.model_version
order by c.document_id, m.active desc, c.completed_at desc;

-- The reembed job looks for documents with their pending embed jobs per version.
create index jobs_embed_pending_idx on jobs (((payload ->> 'document_id')::bigint), (payload ->> 'model_version'))
    where kind = 'embed' and status in ('ready', 'running');
