-- Extends the leases ($1 ids, $2 their tokens, side by side) by $3 milliseconds from $4 (null:
-- the database's clock); returns the jobs still held.
update jobs
set lease_until = coalesce($4::timestamptz, clock_timestamp()) + $3 * interval '1 millisecond',
    updated_at = now()
from unnest($1::bigint[], $2::uuid[]) as held(id, token)
where jobs.id = held.id
  and jobs.status = 'running'
  and jobs.lease_token = held.token
returning jobs.id as "id: JobId"
