-- Marks the jobs of the leases ($1 ids, $2 their tokens, side by side) done; returns those it
-- matched.
update jobs
set status = 'done',
    lease_token = null,
    lease_until = null,
    finished_at = now(),
    updated_at = now()
from unnest($1::bigint[], $2::uuid[]) as held(id, token)
where jobs.id = held.id
  and jobs.status = 'running'
  and jobs.lease_token = held.token
returning jobs.id as "id: JobId"
