/* The Redis key layout: the one place it is written down.
 *
 * Every key of an account starts with the prefix P = "llmq:{ACCOUNT}:" (see
 * llmq_account_prefix), so one account lives in one Redis Cluster slot and each
 * script touches one slot. Scripts get P as KEYS[1] and derive the rest, since
 * the buckets and jobs a script touches are only known inside it.
 *
 * Names (account, model, tenant, user, job id) never contain whitespace, '/',
 * '|', '{' or '}' (llmq_name_valid), so the separators below are unambiguous.
 * A job id is its Batch custom_id (any string) with those bytes, and a '%'
 * that starts "%XX", written as "%XX" (common/jobs/job_id.h): one-to-one, so
 * no two custom_ids share a key, and a ':' in an id is harmless where an id
 * follows a fixed head ("<fin_ms>:<id>" in P done splits at the first ':').
 *
 * Limiter
 *   P limit:<bucket>   HASH  the bucket: its limits (requests, tokens, period_ms,
 *                            mode window|gcra, burst_requests, burst_tokens,
 *                            soft 0|1) and its live counters (n, tok, oldest: the
 *                            window log's count, token sum and earliest time;
 *                            rtat/ttat: GCRA; pause: until, ms; exp: when its
 *                            keys expire; learned_requests, learned_tokens,
 *                            learned_until: lower limits the API reported, which
 *                            bind until then; a model's allowance_ms,
 *                            allowance_at, lifetime_ms, lifetime_at: the two
 *                            parts of its arrival guard as they last grew, and
 *                            when, ms; their decay is computed, never written).
 *                            A hash without
 *                            limits of its own (a tenant under a default) expires
 *                            when idle.
 *   P policy           HASH  headroom_low, headroom_normal, headroom_high (percent),
 *                            soft_threshold (percent), window_guard_ms (pins the
 *                            arrival guard; absent: learned per model);
 *                            users_by_tenant_ms: when a script with a bucket
 *                            per tenant's user first ran (set once by
 *                            limiter_session; within one hold of it a new
 *                            tenant's user bucket starts with the admissions
 *                            the older shared "<model>/u/<user>" made before)
 *   P bw:<bucket>      ZSET  sliding-window log: member "<resid>:<tokens>",
 *                            score = admission time (ms, Redis TIME); the
 *                            admissions whose arrival is not known yet
 *   P bws:<bucket>     ZSET  the same for settled calls whose lateness was
 *                            measured: score = their latest arrival at the
 *                            API (admission + lateness, ms, Redis TIME)
 *   P seq              STRING reservation id counter
 *   Buckets: "<model>" (account+model, hard), "<model>/t/<tenant>", and a
 *   user's: "<model>/t/<tenant>/u/<user>" (a user is a user of its tenant:
 *   two tenants' users of one name never share a bucket, and a tenant's key
 *   reaches only buckets under "<model>/t/<tenant>"), "<model>/u/<user>" for
 *   a user of a job without a tenant (no tenant's user bucket has that form:
 *   tenant names are never empty). "*" names defaults: a tenant without a
 *   limit of its own uses "<model>/t/" + "*"; a user the first set of
 *   "<model>/t/<tenant>/u/" + "*" (its tenant's default for its users),
 *   "<model>/u/<user>" (that user in every tenant: `llmq limits set --user U`
 *   without --tenant), "<model>/u/" + "*" (every user of every tenant). A
 *   bucket under a default keeps its own state. Older versions named
 *   every tenant's user "<model>/u/<user>": their limits and weights keep
 *   their meaning for every tenant's user (docs/upgrading.md).
 *
 * Jobs
 *   P jr:<id>          STRING the record of a job no worker has taken yet
 *                            (queued or held): state and the small fields below
 *                            packed as text, then its body as the producer
 *                            stored it (common/jobs/job_pack.h); one key, so a
 *                            waiting job costs its line and about 100 B
 *                            (lua/lib/job_record.lua has the format; docs/operations.md
 *                            "Sizing Redis"). Written by enqueue; turned into
 *                            job:<id> + body:<id> by whatever writes the job
 *                            next (dispatch's grant, a dead letter, a cancel,
 *                            job_finish), until it ends (res:<id>)
 *   P job:<id>         HASH  model, url, cost (tokens), prio (high|normal|low),
 *                            tenant, user, deadline_ms (unix ms, 0 = none),
 *                            max_attempts, attempts, enq_ms, state
 *                            (held|queued|delayed|running|done|dead|cancelled,
 *                            staged|offloaded: offload, field pb, below;
 *                            held: a gateway batch's job waiting for the batch
 *                            to be whole, in no queue: lua/batch_stage.lua),
 *                            last_error, lease (a sync call's: the gateway
 *                            lease it needs), an and a1..a8 (its calls, the
 *                            last 8 in a ring: lua/lib/attempts.lua): small
 *                            fields only, so Redis keeps it a listpack (every
 *                            value within hash-max-listpack-value, 64 bytes by
 *                            default; docs/operations.md "Sizing Redis"). From a job's
 *                            grant (or dead letter, cancel) until it ends;
 *                            kept by a dead job only (state dead). A hash of
 *                            the layouts before also holds state done (and
 *                            their body, result fields): read as such (docs/upgrading.md)
 *   P body:<id>        STRING the job's request body (as stored: packed or JSON
 *                            text, common/jobs/job_pack.h) while it may
 *                            run again: from its grant until it is done or
 *                            cancelled (deleted then, with job:<id>), kept
 *                            while it is dead (for `llmq dead retry`)
 *   P q:<prio>         STREAM delivery: dispatch XADDs {id: <job id>} for each job it
 *                            grants and delivers it at once to the worker's consumer of
 *                            group "workers" (PEL, XAUTOCLAIM, hand-back as before).
 *                            Entries written by anything else (the old layout, hostile
 *                            data) are read by dispatch and moved to their key.
 *   P delayed          ZSET  member job id, score = due time (unix ms); due jobs go back
 *                            to the head of their key
 *
 * Scheduler (lua/lib/sched.lua): a waiting job is in exactly one key queue.
 *   P kq:<key>         LIST  job ids, FIFO; key = "<prio>|<model>|<tenant>|<user>"
 *                            (tenant, user '' when none)
 *   P sm:<prio>        ZSET  models with runnable work, score = served cost
 *   P st:<prio>|<model> ZSET tenants with runnable work, score = virtual time
 *                            (start-time fair queuing: + cost / weight per job)
 *   P su:<prio>|<model>|<tenant> ZSET users with runnable work, the same way
 *   P sblk             ZSET  blocked nodes "<prio>|<model>[|<tenant>[|<user>]]", score =
 *                            the ms their bucket's exact wait ends
 *   P sbb:<bucket>     ZSET  the nodes blocked on bucket (same members and scores as in
 *                            sblk when blocked): room given back to the bucket (refund,
 *                            usage settle) unblocks them; expires with its latest wait
 *   P svt              HASH  virtual time of each level, field = the parent's path
 *   P weights          HASH  fair-share weights, field = the node's bucket name
 *                            ("<model>/t/<tenant>", a user's as above; defaults
 *                            as for limits), `llmq limits set --weight`; 1 when none
 *   P backlog:<prio>   LIST  one element per job waiting in the priority's keys: LLEN
 *                            is the backlog (status, metrics, KEDA)
 *   P wake             STREAM short (MAXLEN ~1000): an entry per event that may shorten
 *                            a waiting worker's wait; idle workers XREAD BLOCK on it
 *   Endpoints (lua/lib/endpoints.lua, `llmq endpoints`): a model's
 *   endpoints each have their own bucket "<model>@<endpoint>" (endpoint names:
 *   1..64 of A-Z a-z 0-9 . _ -, so the last '@' splits it), under the same
 *   model node, chosen per grant by the dispatch script, so the key stays
 *   what the job asks for; tenant and user buckets stay the model's. A model
 *   no endpoint serves has the bucket "<model>" (the implicit endpoint).
 *   P eps              ZSET  endpoint names, score = when added (ms)
 *   P ep:<name>        HASH  base_url, api_version, kind, tier, weight,
 *                            fail_threshold, fail_window_ms, cooldown_ms,
 *                            cooldown_max_ms, probe_ms, "m:<model>" = 1 per
 *                            model served, "dep:<model>" its Azure deployment.
 *                            Never a key: workers hold those
 *   P eph:<name>       HASH  shared health, written by job_settle: state
 *                            ok|cooling|disabled, why, since_ms, fails,
 *                            fail_t0, cool_until, cool_ms, probe_until, lat_ms
 *                            (EWMA), n_ok, n_fail, n_429
 *   P epm:<model>      SET   the endpoints serving model
 *   P eproute          HASH  model -> spillover|balanced|fastest
 *   P epfb             HASH  model -> its fallback model
 *   job fields pin (endpoints the job may use, comma-separated) and epx (the
 *   endpoints that failed it). A spend budget is
 *   one more bucket on the path (and one more node level when it must block a
 *   whole tenant across models).
 *   A spend budget is one more bucket on the path (lua/lib/budget.lua; see
 *   Spend below), blocking the node of its scope.
 *   P res:<id>         STRING the ended record of a job that ended
 *                            (lua/lib/job_ended.lua has the format): "E2", its
 *                            state and fin_ms, then attempts, enq_ms, run_ms,
 *                            prio, model, tenant, user, last_error and its calls
 *                            (lua/lib/attempts.lua) as text ("E1": without the
 *                            calls), then its Batch output line (a done job's packed,
 *                            common/jobs/job_pack.h); one key, so a done job
 *                            costs its line and about 100 B (docs/operations.md "Sizing
 *                            Redis"). Written once by llmq_job_finish (SET NX),
 *                            with the result's TTL when done or cancelled (the
 *                            job's hash and body deleted then: the record is
 *                            the job), none when dead (hash and body kept).
 *                            The previous layout's is the bare line (JSON
 *                            text, never starting with 'E'), its state and
 *                            fin_ms in the hash; the one before kept the line
 *                            in the hash's field result (both read:
 *                            common/jobs/job_result.h); deleted with its job
 *                            (sweep, dead purge/retry)
 *   P events           STREAM for waiters: an entry per call that finished jobs,
 *                            {id, state: done|dead|cancelled} for each (at most 64)
 *   P dead             STREAM {id, reason, error, ts}: dead-lettered jobs
 *
 *   More on jobs (producer side: common/jobs/, lua/enqueue.lua, lib/jobs.lua):
 *   - id is the Batch custom_id (required unless enqueue --generate-ids), else generated
 *     ("job-<unix ms hex>-<16 hex random>"); it is also the output line's
 *     custom_id. tenant and user are '' when none.
 *   - extra job fields: est_prompt_tokens (the prompt part of cost), consumer
 *     and run_ms (who took it, when), fin_ms (unix ms the job ended),
 *     dead_entry (its entry id in P dead, while dead), fb (its cost as its
 *     model's fallback model, "<fallback> <cost> <prompt>": lua/enqueue.lua
 *     {fb}). The id is the key's, not a field.
 *   - enqueue (lua/enqueue.lua) writes nothing when jr:<id>, job:<id> or
 *     res:<id> exists: the id is the idempotency key while any lives.
 *   - a job ends only through llmq_job_finish(P, id, state, output_line, reason,
 *     now_ms) in lua/lib/jobs.lua (state done|dead|cancelled): the SET NX of
 *     its ended record res:<id> is its once-only guard, with the hash's fin_ms
 *     (which the finishes of the layouts before set; a job whose hash went
 *     while it ran gets its one result all the same); it tells events (one
 *     entry for the finishes of one call, llmq_jobs_finish_flush; and, dead,
 *     XADDs dead and sets the hash's state, fin_ms, last_error = reason and
 *     dead_entry), and applies retention. A done or cancelled job's record
 *     gets the result's TTL (result_ttl_ms) and its hash and body go (one DEL
 *     per call); a dead one keeps its hash, body and record without a TTL,
 *     until `llmq dead retry` (back to queued, attempts 0, no result) or
 *     `llmq dead purge` (all deleted).
 *   P done             LIST  "<fin_ms>:<id>" of each done or cancelled job, in finish
 *                            order
 *                            (one RPUSH per settle call): the retention index.
 *                            Beyond settings result_max or older than
 *                            result_ttl_ms, res:<id> (and job:<id>, body:<id> of
 *                            the layouts before) are deleted (oldest first, at
 *                            most 64 per finish; the TTL too), unless the job is
 *                            not done or cancelled (live again) or its fin_ms
 *                            (the record's head, else the hash's) is not the
 *                            entry's (a later finish of the id: its own entry)
 *   P results          ZSET  the index of older versions (ids scored by fin_ms):
 *                            each settle call moves its newest 256 to the head
 *                            of P done until it is gone (docs/upgrading.md)
 *   P workers          HASH  consumer name -> unix ms it last ran dispatch or
 *                            reclaim (its heartbeat; live = seen within
 *                            LLMQ_WORKER_LIVE_MS); removed by a worker that exits
 *                            cleanly, dropped by reclaim after a day of silence
 *   P winfo            HASH  consumer name -> what the worker is, JSON
 *                            {"version", "endpoints": [names served; "" the
 *                            accounts' own key]}: written a second after its
 *                            start (worker/recover.c) and by its reclaim
 *                            (lua/reclaim.lua, every third of the visibility
 *                            timeout), removed and dropped with its P workers
 *                            entry
 *   P stats            HASH  counters: done, dead, cancelled (jobs ended, ever), http_429
 *                            (429 replies seen; the worker HINCRBYs it),
 *                            insufficient_quota (those of them that were),
 *                            http_429_spurious (rate-limit 429s whose headers
 *                            said the API had room: job_settle.lua),
 *                            own_429_wait and own_429_budget (429s llmq-gateway
 *                            answered itself: a call waited --max-wait-ms, or a
 *                            spend budget refused it; gateway/call_job.c);
 *                            offload's per model (lua/offload_stats.lua):
 *                            pb_staged|<model>, pb_offloaded|<model>,
 *                            pb_done|<model>, pb_failed|<model>,
 *                            pb_saved_nusd|<model>, pb_ended|<model>
 *   P calib            HASH  prompt-token estimate calibration per model:
 *                            "<model>|n", "|est", "|act", "|abs", "|under",
 *                            "|rel", "|rel2" (common/jobs/calibration.h)
 *   P settings         HASH  retention and enqueue settings, `llmq settings`:
 *                            result_ttl_ms (default 7 days), result_max (1000000),
 *                            events_max (100000: about how many jobs the
 *                            events entries name, an approximate MAXLEN),
 *                            events_ttl_ms (1 day; events older are trimmed),
 *                            max_body_bytes (1048576, checked by enqueue)
 *   P auth_pause       HASH  present while the account is paused because the API
 *                            refused its key (401/403; lua/job_settle.lua mode
 *                            authpause): key_id (first 16 hex digits of the
 *                            key's SHA-256, never the key), status ("http 401
 *                            invalid_api_key"), since_ms, job (the job that got
 *                            it). Dispatch grants nothing while it exists;
 *                            lua/account_resume.lua deletes it (`llmq account
 *                            resume`, or a worker starting with another key).
 *   job field cancel = 1: cancelled (lua/job_cancel.lua): a queued or delayed
 *   job ends at once with state cancelled (last_error cancelled; kept like a
 *   done job: its ended record alone, TTL, P done, stats cancelled; never in
 *   P dead) and leaves its
 *   kq: list and P backlog:<prio> in the same call; a running one is never
 *   sent again should it come back to dispatch (it ends cancelled then).
 *
 * Spend (lua/lib/budget.lua; `llmq budgets`, `llmq prices`, `llmq spend`)
 *   P budgets          HASH  scope -> the ids of its budgets, space-separated. Scopes:
 *                            "account", "t/<tenant>", "t/<tenant>/u/<user>", "u/<user>"
 *                            (a user of jobs without a tenant), "k/<key id>" (a gateway
 *                            key: 16 hex digits of its SHA-256, job field key)
 *   P budget:<id>      HASH  one budget, id "<scope>#<tokens|usd>/<day|month|<S>s>":
 *                            scope, unit, limit (tokens, or nano-USD: 1e-9 USD), period
 *                            (day | month: UTC calendar; or seconds, aligned on the
 *                            epoch), on_exhaust (park|dead); p (unix ms start of the
 *                            period spent counts) and spent (charged: reservations at
 *                            their worst case, settled to real usage). Jobs parked on it
 *                            are nodes in P sblk noted in P sbb:$<id>
 *   P prices           HASH  model -> "<input>,<cached input>,<output>" nano-USD per token
 *                            (USD per 1M tokens x 1000): the account's prices over the
 *                            table of data/prices.json
 *   P spend:<day>      HASH  usage of the jobs done on UTC day "YYYY-MM-DD", field
 *                            "<model>|<tenant>|<user>|<n|in|cached|out|tok|nusd>" (jobs,
 *                            prompt, cached prompt, output, total tokens, nano-USD; nusd
 *                            only for priced models), and "...|<hits|saved>": response
 *                            cache hits and the nano-USD their original calls cost
 *                            (spent by none); expires 400 days after its last write
 *   P done_sec:<s>     HASH  the jobs done in unix second s (their spend counters' share),
 *                            field "<model>|<tenant>|<n|tok>"; expires after 2 minutes:
 *                            `llmq top`'s rates over the last minute (lua/top_snapshot.lua)
 *   job field key: the gateway key a job came through (its budgets apply)
 *
 * Offload (lua/lib/pbatch.lua, worker/pbatch/, `llmq offload`; docs/DESIGN.md §3.10)
 *   P offload          HASH  model -> its offload policy, JSON {"mode": "off"|"all"|"auto",
 *                            "poll_ms", "horizon_s", "max_requests", "max_bytes"};
 *                            "<model>/t/<tenant>" -> a tenant's own policy of it
 *   P pbs:<model>|<url> LIST  staged jobs: ids of jobs of that model and Batch url
 *                            (job state staged) waiting for a provider batch
 *   P pbsi             SET   the "<model>|<url>" whose staging list is not empty
 *   P pb:<id>          HASH  one provider batch of llmq's, id "pb-<ms hex>-<n>": state
 *                            (building|uploading|uploaded|creating|submitted|
 *                            collecting|ended), model, url, n (jobs), owner and
 *                            lease_until (ms: the worker doing its step), file_id,
 *                            batch_id (the provider's), status (the provider's),
 *                            output_file_id, error_file_id, polls, created_ms,
 *                            ended_ms, done, retried, dead, reason, qtok
 *                            (the estimated prompt tokens of its jobs: its
 *                            charge on pbq:<model>, given back when it ends)
 *   P pbj:<id>         LIST  its job ids, in input file order (job field pb = <id>,
 *                            state offloaded while the provider has it)
 *   P pbl              ZSET  every provider batch id, score = created ms
 *   P pba              ZSET  unfinished provider batches, score = when a worker
 *                            should look at it next (ms: its poll, or its lease's end)
 *   P pbe:<model>      LIST  policy auto: ids of eligible jobs queued live (priority
 *                            low), in enqueue order; the auto step stages its tail
 *                            (lua/lib/pbatch_auto.lua); entries of jobs sent live
 *                            or ended are dropped as it meets them
 *   P pbau:<model>     STRING policy auto: present (PX) while the model's last auto
 *                            step is recent: one step per interval per account
 *   P pbq:<bucket>     HASH  the provider's batch queue limit of bucket "<model>"
 *                            (or "<model>@<endpoint>"): limit (prompt tokens,
 *                            `llmq limits set --batch-queue-tokens`), used (the
 *                            estimated prompt tokens of llmq's unfinished provider
 *                            batches: pb:<id> field qtok each), learned and
 *                            learned_until (a lower limit a token_limit_exceeded
 *                            taught), hold_until (no new batch before, ms)
 *   P pbd              ZSET  staged and offloaded jobs that have a deadline, score =
 *                            it (unix ms): pbatch_next ends those whose time passed
 *   P pbp              HASH  "<model>|<url>" -> ms until which its staging list is
 *                            not looked at: its jobs wait for a spend budget
 *                            (at most 10 s, so a raised budget is seen soon)
 *   job field bh: an offloaded job's budget charge (lua/lib/handle.lua's budget
 *                            part), settled at collection, refunded when it leaves
 *   pb:<id> also: cancel (1: all its jobs ended, the provider batch is to be
 *                            cancelled), cancel_sent, fails (job field pb_fails:
 *                            provider batches of it that failed as a whole)
 *
 * Cache (lua/lib/cache.lua, common/jobs/cache_*.h, `llmq cache`; docs/DESIGN.md §3.12)
 *   The name of an entry is "<tenant>|<model>|<hash>": tenant '' for a job
 *   without one ("/<namespace>" for a tenant in one, P cachecfg), hash the
 *   64 hex digits of common/jobs/cache_key.h.
 *   P cache:<name>     STRING a stored answer: "<stored unix ms>[ <prompt> <cached>
 *                            <output>[ t]]\n" (the call's usage, " t": cut off) then the
 *                            Batch output line of the job that made it, as
 *                            stored (jobs/job_pack.h); expires at its TTL
 *   P cachef:<name>    STRING the id of the job in flight for that name (the
 *                            leader: queued or running), while it is
 *   P cachew:<name>    LIST  ids of jobs waiting for the leader's answer (job
 *                            state coalesced, in no queue)
 *   P cachei           ZSET  every entry's name, score = when it expires (ms):
 *                            `llmq cache stats|purge` (trimmed as entries are stored)
 *   P caches           HASH  counters: hits, misses, coalesced, stored,
 *                            stored_bytes, saved_tokens, saved_nusd (what the
 *                            hits' original calls cost at the account's prices;
 *                            also P spend:<day> fields "<m>|<t>|<u>|hits|saved")
 *   P cachedl          ZSET  ids of coalesced jobs that have a deadline, score =
 *                            the deadline (ms): dispatch ends those past it
 *                            expired (a waiter does not outwait its deadline)
 *   P cachecfg         HASH  defaults and namespaces (`llmq cache set`):
 *                            "<model>" and "<model>/t/<tenant>" (the tenant's
 *                            own, which wins) -> "<mode> <ttl_s>", the mode of
 *                            jobs that ask nothing; "ns/<tenant>" -> the name of
 *                            the namespace the tenant's entries are in (entry
 *                            names "/<namespace>|<model>|<hash>", shared by its
 *                            tenants; '/' is in no tenant name)
 *   job fields ck (its entry's name) and cttl (TTL, s): a job that may
 *   store an answer (cache mode use or refresh); ctr: it may store a cut-off
 *   one; cv: a held job's {cache} value (lua/enqueue.lua), decided when its
 *   gateway batch queues it (lua/batch_stage.lua)
 *
 * Gateway (gateway/, `llmq keys`)
 *   P gw:key:<sha256>  HASH  a gateway key, known only by the SHA-256 (hex) of
 *                            its text: tenant ('' none), user ('' none: the
 *                            request's "user" field), priority (sync calls),
 *                            models (comma-separated; '' all), created_ms,
 *                            role ('' a client key for /v1; 'admin' or
 *                            'viewer': a dashboard key, refused on /v1)
 *   P gw:keys          ZSET  the SHA-256 of every key, score = created_ms
 *   P dash:sess:<sha256> HASH a dashboard session (gateway/dashboard/), known
 *                            by the SHA-256 of its cookie's token: key (the
 *                            SHA-256 of the dashboard key that logged in),
 *                            csrf (the token every action must send back);
 *                            PEXPIRE --dashboard-session-ms, renewed on use
 *   P gw:file:<id>     HASH  an uploaded file ("file-<24 hex>"): filename,
 *                            purpose, bytes, lines, created_at (unix s), tenant,
 *                            layout ("jobs1": its requests are in
 *                            P gw:file:<id>:jobs, its bytes in P gw:file:<id>:data).
 *                            A file stored before that layout has no layout
 *                            field and its bytes in the field content, checked
 *                            again (off the loop) when a batch is made of it
 *   P gw:file:<id>:jobs LIST the file's requests, checked once at upload, one
 *                            record per request in file order
 *                            (gateway/file_jobs.h): what creating a batch needs,
 *                            without reading the JSON again
 *   P gw:file:<id>:data STRING the file's bytes as uploaded (for GET
 *                            /v1/files/<id>/content only)
 *   P gw:files         ZSET  file ids, score = created ms
 *   P gw:batch:<id>    HASH  a Batch ("batch_<24 hex>"): endpoint,
 *                            input_file_id, completion_window, metadata (JSON),
 *                            status, total, completed, failed, expired,
 *                            created_at, in_progress_at, cancelling_at,
 *                            finalizing_at, completed_at, cancelled_at,
 *                            expired_at, failed_at, expires_at (unix s), errors
 *                            ; while it is being created (status validating,
 *                            hidden from every read) and until its last job
 *                            is queued: lease, the creating gateway's id
 *                            (lua/batch_stage.lua); while cancelling:
 *                            cancel_swept = 1 once one cancel has looked at
 *                            every job id
 *   P gw:batch:<id>:jobs LIST its job ids, in input order
 *   P gw:batch:<id>:live SET  while cancelling: its jobs a cancel found
 *                            running (they end on their own; lua/job_cancel.lua)
 *   P gw:batches       ZSET  batch ids, score = created ms (a batch enters
 *                            when it is whole: lua/batch_stage.lua commit)
 *   P gw:staging       SET   ids of batches being created or committed: a
 *                            batch whose gateway's lease is gone is finished
 *                            (committed) or rolled back (aborted) by another
 *                            gateway (lua/gw_lease.lua)
 *   P gw:lease:<id>    STRING a live gateway's lease (PX --lease-ms, renewed
 *                            every third of it): the sync calls it enqueued
 *                            (job field lease) and the batches it creates are
 *                            its while it lives
 *   P sse:<gateway id> CHANNEL (pub/sub; no key is stored) a gateway's stream
 *                            relay: that gateway subscribes once, for all its
 *                            streamed calls (their jobs' field lease names
 *                            it); a worker publishes there the events of
 *                            every stream it relays to it, a few
 *                            milliseconds' worth per message
 *                            (jobs/stream_relay.h); a publish that reaches
 *                            no subscriber tells the worker the gateway is
 *                            gone
 *   P ssw:<worker>     CHANNEL (pub/sub) a worker's (its --consumer name):
 *                            gateways publish there that a client left
 *                            (the worker aborts that upstream call)
 *   A Batch's jobs have ids "<batch id>.<custom_id>"; llmq_job_finish counts
 *   each end into the batch (completed, failed, expired) and ends the batch
 *   when all have (lua/lib/jobs.lua llmq_jobs_batch_settle). Its output and
 *   error files ("file-out_<batch id>", "file-err_<batch id>") are read from
 *   the jobs' results (job_result.h), so they live as long as those are kept.
 *
 *   P slot_guard       (none) never written: every FCALL declares it after
 *                            its own keys (script.c), so while the account's
 *                            slot migrates between cluster nodes every call
 *                            is refused before it runs (redis/cluster.h)
 *
 *   Queue streams keep the entries settles acknowledged (no XDEL: it cost
 *   more than the rest of a settle's stream work) until a trim, every 256
 *   done and every 256 dead jobs, only below each group's oldest pending
 *   entry and last delivered id: never an unacknowledged entry.
 */
#ifndef LLMQ_KEYS_H
#define LLMQ_KEYS_H

#include <stddef.h>

#include "llmq/error.h"

#define LLMQ_KEY_PREFIX_MAX 256
/* A buffer for any key without a name in it (P policy, P q:<prio>, ...). */
#define LLMQ_KEY_FIXED_MAX (LLMQ_KEY_PREFIX_MAX + 32)
#define LLMQ_GROUP "workers"
/* A worker not heard from for this long is not live (P workers): an idle one
 * dispatches every 5 s, a busy one reclaims every third of its visibility
 * timeout (20 s by default). */
#define LLMQ_WORKER_LIVE_MS 30000

/* The kinds of key above, each built only by llmq_key in C (the names are
 * in the table of keys.c) and only by its KEY.<kind> helper in Lua (the
 * kind's name in lower case, without LLMQ_KEY_: KEY.job(P, id); generated
 * from the table by cmake/embed_lua.cmake). The kinds marked <name> take a
 * name (a bucket, priority, job or object id, or a SCAN pattern such as
 * "*"); the others take NULL (in Lua: no name). A new kind: one value here,
 * one row in the table. */
enum llmq_key_kind {
    LLMQ_KEY_LIMIT,         /* P limit:<bucket> */
    LLMQ_KEY_POLICY,        /* P policy */
    LLMQ_KEY_WINDOW_LOG,    /* P bw:<bucket> */
    LLMQ_KEY_ARRIVED_LOG,   /* P bws:<bucket> */
    LLMQ_KEY_JOB,           /* P job:<id> */
    LLMQ_KEY_JOB_RECORD,    /* P jr:<id> */
    LLMQ_KEY_JOB_BODY,      /* P body:<id> */
    LLMQ_KEY_QUEUE,         /* P q:<prio> */
    LLMQ_KEY_DELAYED,       /* P delayed */
    LLMQ_KEY_WEIGHTS,       /* P weights */
    LLMQ_KEY_BACKLOG,       /* P backlog:<prio> */
    LLMQ_KEY_WAKE,          /* P wake */
    LLMQ_KEY_RESULT,        /* P res:<id> */
    LLMQ_KEY_EVENTS,        /* P events */
    LLMQ_KEY_DEAD,          /* P dead */
    LLMQ_KEY_DONE,          /* P done */
    LLMQ_KEY_OLD_RESULTS,   /* P results (older versions' index) */
    LLMQ_KEY_WORKERS,       /* P workers */
    LLMQ_KEY_WORKER_INFO,   /* P winfo */
    LLMQ_KEY_STATS,         /* P stats */
    LLMQ_KEY_CALIB,         /* P calib */
    LLMQ_KEY_SETTINGS,      /* P settings */
    LLMQ_KEY_AUTH_PAUSE,    /* P auth_pause */
    LLMQ_KEY_GW_KEY,        /* P gw:key:<sha256> */
    LLMQ_KEY_GW_KEYS,       /* P gw:keys */
    LLMQ_KEY_GW_FILE,       /* P gw:file:<id> */
    LLMQ_KEY_GW_FILES,      /* P gw:files */
    LLMQ_KEY_GW_FILE_JOBS,  /* P gw:file:<id>:jobs */
    LLMQ_KEY_GW_FILE_DATA,  /* P gw:file:<id>:data */
    LLMQ_KEY_GW_BATCH,      /* P gw:batch:<id> */
    LLMQ_KEY_GW_BATCH_JOBS, /* P gw:batch:<id>:jobs */
    LLMQ_KEY_GW_BATCHES,    /* P gw:batches */
    LLMQ_KEY_GW_STAGING,    /* P gw:staging */
    LLMQ_KEY_GW_LEASE,      /* P gw:lease:<gateway id> */
    LLMQ_KEY_BUDGETS,       /* P budgets */
    LLMQ_KEY_BUDGET,        /* P budget:<id> */
    LLMQ_KEY_PRICES,        /* P prices */
    LLMQ_KEY_SPEND,         /* P spend:<YYYY-MM-DD> */
    LLMQ_KEY_SSE,           /* P sse:<gateway id> (a pub/sub channel) */
    LLMQ_KEY_SSE_WORKER,    /* P ssw:<worker name> (a pub/sub channel) */
    LLMQ_KEY_SLOT_GUARD,    /* P slot_guard */
    LLMQ_KEY_SEQ,           /* P seq (it and those below: the scripts' only) */
    LLMQ_KEY_KEY_QUEUE,     /* P kq:<key> */
    LLMQ_KEY_SCHED_MODELS,  /* P sm:<prio> */
    LLMQ_KEY_SCHED_TENANTS, /* P st:<prio>|<model> */
    LLMQ_KEY_SCHED_USERS,   /* P su:<prio>|<model>|<tenant> */
    LLMQ_KEY_SCHED_BLOCKED, /* P sblk */
    LLMQ_KEY_BLOCKED_ON,    /* P sbb:<bucket> */
    LLMQ_KEY_SCHED_VTIME,   /* P svt */
    LLMQ_KEY_ENDPOINTS,     /* P eps */
    LLMQ_KEY_ENDPOINT,      /* P ep:<name> */
    LLMQ_KEY_EP_HEALTH,     /* P eph:<name> */
    LLMQ_KEY_MODEL_EPS,     /* P epm:<model> */
    LLMQ_KEY_EP_ROUTES,     /* P eproute */
    LLMQ_KEY_EP_FALLBACKS,  /* P epfb */
    LLMQ_KEY_GW_BATCH_LIVE, /* P gw:batch:<id>:live */
    LLMQ_KEY_DONE_SEC,      /* P done_sec:<unix s> */
    LLMQ_KEY_OFFLOAD,       /* P offload */
    LLMQ_KEY_PB_STAGE,      /* P pbs:<model>|<url> */
    LLMQ_KEY_PB_STAGED,     /* P pbsi */
    LLMQ_KEY_PBATCH,        /* P pb:<id> */
    LLMQ_KEY_PBATCH_JOBS,   /* P pbj:<id> */
    LLMQ_KEY_PBATCHES,      /* P pbl */
    LLMQ_KEY_PBATCH_DUE,    /* P pba */
    LLMQ_KEY_PB_ELIGIBLE,   /* P pbe:<model> */
    LLMQ_KEY_PB_AUTO,       /* P pbau:<model> */
    LLMQ_KEY_PB_QUEUE,      /* P pbq:<bucket> */
    LLMQ_KEY_PB_DEADLINES,  /* P pbd */
    LLMQ_KEY_PB_PARKED,     /* P pbp */
    LLMQ_KEY_DASH_SESSION,  /* P dash:sess:<sha256> */
    LLMQ_KEY_CACHE,         /* P cache:<tenant>|<model>|<hash> */
    LLMQ_KEY_CACHE_FLIGHT,  /* P cachef:<tenant>|<model>|<hash> */
    LLMQ_KEY_CACHE_WAIT,    /* P cachew:<tenant>|<model>|<hash> */
    LLMQ_KEY_CACHE_INDEX,   /* P cachei */
    LLMQ_KEY_CACHE_STATS,   /* P caches */
    LLMQ_KEY_CACHE_DUE,     /* P cachedl */
    LLMQ_KEY_CACHE_CONFIG,  /* P cachecfg */
    LLMQ_KEY_KIND_COUNT
};

/* Key prefix of an account: "llmq:{ACCOUNT}:" into buf of size n. Returns
 * LLMQ_EINVAL when the account is not a valid name (see llmq_name_valid). */
enum llmq_rc llmq_account_prefix(const char *account, char *buf, size_t n, struct llmq_error *err);

/* A name (account, model, tenant, user, job id) is 1..200 bytes of printable
 * ASCII or UTF-8 without whitespace, control characters, '/', '|', '{' or '}':
 * those separate the parts of keys and reservation handles. Returns 1 if ok. */
int llmq_name_valid(const char *s);

/* Writes the key of that kind of the account with prefix P (from
 * llmq_account_prefix) into buf (len bytes, caller-owned; borrows prefix and
 * name). name is required for the kinds that take one and must be NULL for
 * the others. Returns LLMQ_OK, or LLMQ_EINVAL (err says why, buf holds "")
 * when kind is unknown, name is missing or extra, or the key does not fit. */
enum llmq_rc llmq_key(char *buf, size_t len, const char *prefix, enum llmq_key_kind kind,
                      const char *name, struct llmq_error *err);

/* The part of a key of that kind after P and before its name ("limit:"), or
 * NULL for an unknown kind: for reading a name back out of a key. Static. */
const char *llmq_key_head(enum llmq_key_kind kind);

#endif
