-- Fair share: a job may carry a key (the pipeline's: its document's collection), and a claim
-- gives each key with due work its turn, fewest running first, instead of first in, first out
-- over the whole kind. One bulk upload then delays another collection's single file by at most
-- one claim batch per worker, whatever its backlog. Jobs without a key share the empty one, so
-- a kind nobody keys claims exactly as before.

alter table jobs add column fair_key text collate "C" not null default '';

-- The claim's walk over the keys with due work, and each key's oldest due jobs. It replaces
-- jobs_ready_idx, which the claim no longer reads: one index fewer to keep on the hot table
-- (the counts of ready jobs read this one as well).
create index jobs_ready_fair_idx on jobs (kind, fair_key, run_at, id) where status = 'ready';
drop index jobs_ready_idx;
-- How many jobs of each key are running (a handful: at most the slots of the fleet).
create index jobs_running_fair_idx on jobs (kind, fair_key) where status = 'running';
