-- The claim: up to $2 due `ready` jobs of kind $1, oldest first, become `running` under a fresh
-- lease of $3 milliseconds held by worker $4. $5/$6: an optional payload filter (the key and
-- the values to skip; both null for none). $7: the time, null for the database's clock.
--
-- The ids are picked in a subquery under `for update skip locked` and updated by
-- `id = any(array(...))`: with this shape PostgreSQL keeps the plan on jobs_ready_idx even under
-- a generic plan, where a CTE or a join with `limit $2` was measured to scan the whole table.
-- The `!` on the lease columns states what jobs_lease_check guarantees for a running row.
update jobs
set status = 'running',
    attempts = attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce($7::timestamptz, clock_timestamp()) + $3 * interval '1 millisecond',
    leased_by = $4,
    updated_at = now()
where id = any(array(
    select id
    from jobs
    where status = 'ready'
      and kind = $1
      and run_at <= coalesce($7::timestamptz, now())
      and ($5::text is null or not coalesce(payload ->> $5, '') = any($6::text[]))
    order by run_at, id
    limit $2
    for update skip locked))
returning id as "id: JobId", kind, payload, attempts, max_attempts,
    lease_token as "lease_token!", lease_until as "lease_until!", run_at
