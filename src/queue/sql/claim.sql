-- The claim: up to $2 due `ready` jobs of kind $1 become `running` under a fresh lease of $3
-- milliseconds held by worker $4. $5/$6: an optional payload filter (the key and the values to
-- skip; both null for none). $7: the time, null for the database's clock.
--
-- Fair share between the jobs' `fair_key`s (the pipeline's: a collection):
-- 1. `keys` walks the distinct keys that have due work, one index probe each (a loose index
--    scan over jobs_ready_fair_idx), so a key with a million waiting jobs costs one probe;
-- 2. `turns` orders them by how many of their jobs run now (fewest first), then by their oldest
--    due job, and keeps the first $2: a claim never needs more keys than jobs;
-- 3. `offered` takes each such key's oldest due jobs under `for update skip locked`, so
--    concurrent claims take different rows;
-- 4. the claim takes them round-robin: every key's first job, then every key's second, …
-- With a single key (every kind nobody keys) this is oldest first, as before.
-- The `!` on the lease columns states what jobs_lease_check guarantees for a running row.
with recursive keys (fair_key) as (
    (select fair_key
     from jobs
     where status = 'ready'
       and kind = $1
       and run_at <= coalesce($7::timestamptz, now())
     order by fair_key
     limit 1)
    union all
    select (select j.fair_key
            from jobs j
            where j.status = 'ready'
              and j.kind = $1
              and j.fair_key > k.fair_key
              and j.run_at <= coalesce($7::timestamptz, now())
            order by j.fair_key
            limit 1)
    from keys k
    where k.fair_key is not null
),
turns as (
    select k.fair_key,
           row_number() over (order by
               (select count(*) from jobs r
                where r.status = 'running' and r.kind = $1 and r.fair_key = k.fair_key),
               (select min(o.run_at) from jobs o
                where o.status = 'ready' and o.kind = $1 and o.fair_key = k.fair_key),
               k.fair_key) as turn
    from keys k
    where k.fair_key is not null
),
offered as (
    select t.turn, p.id, p.run_at
    from (select * from turns where turn <= $2) t
    cross join lateral (
        select j.id, j.run_at
        from jobs j
        where j.status = 'ready'
          and j.kind = $1
          and j.fair_key = t.fair_key
          and j.run_at <= coalesce($7::timestamptz, now())
          and ($5::text is null or not coalesce(j.payload ->> $5, '') = any($6::text[]))
        order by j.run_at, j.id
        limit $2
        for update of j skip locked
    ) p
),
chosen as (
    select id
    from (select id, turn,
                 row_number() over (partition by turn order by run_at, id) as nth
          from offered) o
    order by nth, turn
    limit $2
)
update jobs
set status = 'running',
    attempts = attempts + 1,
    lease_token = gen_random_uuid(),
    lease_until = coalesce($7::timestamptz, clock_timestamp()) + $3 * interval '1 millisecond',
    leased_by = $4,
    updated_at = now()
where id = any(array(select id from chosen))
returning id as "id: JobId", kind, payload, attempts, max_attempts,
    lease_token as "lease_token!", lease_until as "lease_until!", run_at
