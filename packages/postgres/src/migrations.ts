import type { Names } from "./names.js";

/** One step of the store's schema: applied once, in order, inside the migration's transaction. */
export interface Migration {
  version: number;
  description: string;
  sql: string;
}

/**
 * The store's schema, version by version. A version, once released, is never edited: a change is a new
 * version. Every statement must be transactional (no CREATE INDEX CONCURRENTLY): all pending versions and
 * their ledger rows commit together or not at all.
 *
 * Every transition is one SQL function, so each costs one round trip; each function mirrors the Lua script
 * of @once/redis with the same name (packages/redis/src/lua), whose header comment is its contract. Time is
 * the database's (`clock_timestamp()`, in ms); a record whose `expires_at` has passed is absent to every
 * function, and `sweep` deletes it later.
 */
export function migrations(n: Names): Migration[] {
  const records = n.q("records");
  const fn = (name: string) => n.q(name);
  // Every owner write: the record for update, absent when expired; `lost` unless the full token matches.
  const owned = (states: string[]) => `
  select * into r from ${records} t where t.key = p_key and t.expires_at > v_now for update;
  if not found or r.owner is distinct from p_token then code := 11; return; end if;
  if r.state not in (${states.map((s) => `'${s}'`).join(", ")}) then
    code := 12; detail := 'state is ' || r.state || ', not ${states.join(" or ")}'; return;
  end if;`;
  const write = (name: string, params: string, states: string[], body: string) => `
create function ${fn(name)}(p_key text, p_token text${params}, p_retention bigint,
  out code int, out fence bigint, out lease_until bigint, out detail text)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
begin${owned(states)}
${body}
end
$fn$;`;

  const v1 = `
create table ${n.q("records")} (
  key text primary key,
  state text not null check (state in ('claimed', 'reconciling', 'released', 'done', 'failed', 'unknown')),
  phase text not null check (phase in ('prepare', 'effect')),
  fence bigint not null,
  owner text,
  lease_until bigint,
  fp text not null,
  tool text not null,
  claims integer not null,
  created_at bigint not null,
  updated_at bigint not null,
  result text,
  error text,
  trace text,
  res_as text,
  res_by text,
  res_why text,
  res_at bigint,
  expires_at bigint not null
);
create index "${n.tablePrefix}records_expires_at" on ${records} (expires_at);

-- The database's clock in ms: every worker judges leases by the same time, whatever its own clock says.
create function ${fn("now_ms")}() returns bigint
language sql volatile as $fn$ select floor(extract(epoch from clock_timestamp()) * 1000)::bigint $fn$;

create function ${fn("claim")}(p_key text, p_fp text, p_tool text, p_phase text, p_lease bigint,
  p_retention bigint, p_nonce text, p_trace text,
  out code int, out fence bigint, out token text, out lease_until bigint, out claims integer,
  out detail text, out result text, out trace text, out remaining bigint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  v_state text;
  v_phase text;
begin
  loop
    -- A record born now. A concurrent claim of the same key waits here for the winner, then reads its row.
    insert into ${records} as t (key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at,
      updated_at, trace, expires_at)
    values (p_key, 'claimed', p_phase, 1, '1.' || p_nonce, v_now + p_lease, p_fp, p_tool, 1, v_now, v_now,
      nullif(p_trace, ''), v_now + p_retention)
    on conflict (key) do nothing;
    if found then
      code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
      return;
    end if;
    select * into r from ${records} t where t.key = p_key for update;
    exit when found;
    -- Swept between the two statements: insert again.
  end loop;

  if r.expires_at <= v_now then
    -- Expired is absent: the record starts over, as a fresh one.
    update ${records} t set state = 'claimed', phase = p_phase, fence = 1, owner = '1.' || p_nonce,
      lease_until = v_now + p_lease, fp = p_fp, tool = p_tool, claims = 1, created_at = v_now,
      updated_at = v_now, result = null, error = null, trace = nullif(p_trace, ''), res_as = null,
      res_by = null, res_why = null, res_at = null, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
    return;
  end if;

  if r.fp <> p_fp then code := 7; detail := r.tool; return; end if;
  fence := r.fence;
  if r.state = 'done' then code := 4; result := r.result; trace := r.trace; return; end if;
  if r.state = 'failed' then code := 5; result := r.error; trace := r.trace; return; end if;
  if r.state in ('claimed', 'reconciling') and coalesce(r.lease_until, 0) > v_now then
    code := 6; detail := r.state; remaining := r.lease_until - v_now; return;
  end if;

  if r.state = 'released' then code := 1; v_state := 'claimed';
  elsif r.state = 'unknown' then code := 3; v_state := 'reconciling'; detail := 'unknown';
  elsif r.state = 'claimed' and r.phase = 'prepare' then
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    code := 2; v_state := 'claimed';
  elsif r.state in ('claimed', 'reconciling') then code := 3; v_state := 'reconciling'; detail := r.state;
  else
    raise exception 'ONCE_CORRUPT record % has state %', p_key, r.state;
  end if;
  -- A reconciler always works in the effect phase: the effect may already have happened.
  v_phase := case when v_state = 'claimed' then p_phase else 'effect' end;
  fence := r.fence + 1;
  token := fence || '.' || p_nonce;
  lease_until := v_now + p_lease;
  claims := r.claims + 1;
  update ${records} t set state = v_state, phase = v_phase, fence = claim.fence, owner = claim.token,
    lease_until = claim.lease_until, claims = claim.claims, updated_at = v_now,
    trace = coalesce(nullif(p_trace, ''), t.trace), expires_at = v_now + p_retention
  where t.key = p_key;
end
$fn$;
${write(
  "begin_effect",
  "",
  ["claimed"],
  `  update ${records} t set phase = 'effect', updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
  code := 10; fence := r.fence; lease_until := r.lease_until;`,
)}
${write(
  "complete",
  ", p_result text",
  ["claimed"],
  `  update ${records} t set state = 'done', result = p_result, owner = null, lease_until = null, error = null,
    updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}
${write(
  "fail_terminal",
  ", p_error text",
  ["claimed"],
  `  update ${records} t set state = 'failed', error = p_error, owner = null, lease_until = null, result = null,
    updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}
${write(
  "release",
  ", p_not_applied boolean",
  ["claimed"],
  `  if r.phase = 'effect' and not p_not_applied then
    code := 12;
    detail := 'the effect phase has begun: release needs the assertion that the effect was not applied';
    return;
  end if;
  update ${records} t set state = 'released', owner = null, lease_until = null, result = null, error = null,
    updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}
${write(
  "mark_unknown",
  ", p_error text",
  ["claimed"],
  `  update ${records} t set state = 'unknown', owner = null, lease_until = null, result = null,
    error = nullif(p_error, ''), updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}
${write(
  "heartbeat",
  ", p_lease bigint",
  ["claimed", "reconciling"],
  `  -- the lease is a field; when it runs out the record stays and the next claim decides.
  update ${records} t set lease_until = v_now + p_lease, updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
  code := 10; fence := r.fence; lease_until := v_now + p_lease;`,
)}
${write(
  "resolve_applied",
  ", p_result text",
  ["reconciling"],
  `  update ${records} t set state = 'done', result = p_result, owner = null, lease_until = null, error = null,
    updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}
${write(
  "resolve_not_applied",
  "",
  ["reconciling"],
  `  -- the same token keeps the key and goes ahead with the effect.
  update ${records} t set state = 'claimed', phase = 'effect', updated_at = v_now,
    expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence; lease_until := r.lease_until;`,
)}
${write(
  "give_up",
  ", p_error text",
  ["reconciling"],
  `  update ${records} t set state = 'unknown', owner = null, lease_until = null, result = null,
    error = nullif(p_error, ''), updated_at = v_now, expires_at = v_now + p_retention where t.key = p_key;
  code := 10; fence := r.fence;`,
)}

-- unknown -> done | released | failed, by an operator. Fence + 1, so any owner still holding an old token
-- loses; who, when and why are kept on the record.
create function ${fn("resolve")}(p_key text, p_as text, p_payload text, p_by text, p_why text,
  p_expect_fence bigint, p_retention bigint,
  out code int, out fence bigint, out lease_until bigint, out detail text)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  v_state text;
begin
  select * into r from ${records} t where t.key = p_key and t.expires_at > v_now for update;
  if not found then code := 12; detail := 'no record'; return; end if;
  if r.state <> 'unknown' then code := 12; detail := 'state is ' || r.state || ', not unknown'; return; end if;
  if p_expect_fence is not null and p_expect_fence <> r.fence then
    code := 12; detail := 'fence is ' || r.fence || ', expected ' || p_expect_fence; return;
  end if;
  v_state := case p_as when 'applied' then 'done' when 'failed' then 'failed' when 'not_applied' then 'released' end;
  if v_state is null then raise exception 'ONCE_BAD_ARGUMENT unknown decision %', p_as; end if;
  update ${records} t set state = v_state, fence = r.fence + 1, owner = null, lease_until = null,
    result = case when v_state = 'done' then p_payload end,
    error = case when v_state = 'failed' then p_payload end,
    res_as = p_as, res_by = p_by, res_why = p_why, res_at = v_now, updated_at = v_now,
    expires_at = v_now + p_retention
  where t.key = p_key;
  code := 10; fence := r.fence + 1;
end
$fn$;
`;

  // Every row says its layout: how its columns hold the record (RECORD_LAYOUT in record-layout.ts). A row
  // written before this version is at 1, the only layout there was, and `default 1` says so without rewriting
  // the table (a constant default is kept in the catalog). The functions are always the newest build's, so
  // they write every row in their own layout; a layout change sets the column wherever it writes the new
  // form, and a reader that knows an older one refuses the row. The claim hands the row's layout over with
  // what it replays, the only row data a claim passes to the caller as stored.
  const v2 = `
alter table ${records} add column layout smallint not null default 1;

drop function ${fn("claim")}(text, text, text, text, bigint, bigint, text, text);
create function ${fn("claim")}(p_key text, p_fp text, p_tool text, p_phase text, p_lease bigint,
  p_retention bigint, p_nonce text, p_trace text,
  out code int, out fence bigint, out token text, out lease_until bigint, out claims integer,
  out detail text, out result text, out trace text, out remaining bigint, out layout smallint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  v_state text;
  v_phase text;
begin
  loop
    -- A record born now. A concurrent claim of the same key waits here for the winner, then reads its row.
    insert into ${records} as t (key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at,
      updated_at, trace, expires_at)
    values (p_key, 'claimed', p_phase, 1, '1.' || p_nonce, v_now + p_lease, p_fp, p_tool, 1, v_now, v_now,
      nullif(p_trace, ''), v_now + p_retention)
    on conflict (key) do nothing;
    if found then
      code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
      return;
    end if;
    select * into r from ${records} t where t.key = p_key for update;
    exit when found;
    -- Swept between the two statements: insert again.
  end loop;

  if r.expires_at <= v_now then
    -- Expired is absent: the record starts over, as a fresh one.
    update ${records} t set state = 'claimed', phase = p_phase, fence = 1, owner = '1.' || p_nonce,
      lease_until = v_now + p_lease, fp = p_fp, tool = p_tool, claims = 1, created_at = v_now,
      updated_at = v_now, result = null, error = null, trace = nullif(p_trace, ''), res_as = null,
      res_by = null, res_why = null, res_at = null, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
    return;
  end if;

  if r.fp <> p_fp then code := 7; detail := r.tool; return; end if;
  fence := r.fence;
  if r.state = 'done' then
    code := 4; result := r.result; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'failed' then
    code := 5; result := r.error; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state in ('claimed', 'reconciling') and coalesce(r.lease_until, 0) > v_now then
    code := 6; detail := r.state; remaining := r.lease_until - v_now; return;
  end if;

  if r.state = 'released' then code := 1; v_state := 'claimed';
  elsif r.state = 'unknown' then code := 3; v_state := 'reconciling'; detail := 'unknown';
  elsif r.state = 'claimed' and r.phase = 'prepare' then
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    code := 2; v_state := 'claimed';
  elsif r.state in ('claimed', 'reconciling') then code := 3; v_state := 'reconciling'; detail := r.state;
  else
    raise exception 'ONCE_CORRUPT record % has state %', p_key, r.state;
  end if;
  -- A reconciler always works in the effect phase: the effect may already have happened.
  v_phase := case when v_state = 'claimed' then p_phase else 'effect' end;
  fence := r.fence + 1;
  token := fence || '.' || p_nonce;
  lease_until := v_now + p_lease;
  claims := r.claims + 1;
  update ${records} t set state = v_state, phase = v_phase, fence = claim.fence, owner = claim.token,
    lease_until = claim.lease_until, claims = claim.claims, updated_at = v_now,
    trace = coalesce(nullif(p_trace, ''), t.trace), expires_at = v_now + p_retention
  where t.key = p_key;
end
$fn$;
`;

  // Approval requests (docs/approvals.md): the request's columns, two new states, a claim that answers a pending
  // request (code 8), expires one (replayed as approval_expired) and says when its owner holds an approval, and
  // one function per new transition. A row that has had a request is at layout 2 (RECORD_LAYOUT): a reader of
  // layout 1 refuses it instead of misreading its state; a row never asked about stays at 1.
  const expired = `'{"name":"ApprovalExpiredError","message":"the approval request expired with no decision","code":"approval_expired"}'`;
  const v3 = `
alter table ${records} add column apr_reason text, add column apr_at bigint, add column apr_until bigint,
  add column apr_as text, add column apr_by text, add column apr_why text, add column apr_decided bigint;
alter table ${records} drop constraint "${n.tablePrefix}records_state_check";
alter table ${records} add constraint "${n.tablePrefix}records_state_check" check (state in ('claimed',
  'reconciling', 'released', 'done', 'failed', 'unknown', 'awaiting_approval', 'approved'));

drop function ${fn("claim")}(text, text, text, text, bigint, bigint, text, text);
create function ${fn("claim")}(p_key text, p_fp text, p_tool text, p_phase text, p_lease bigint,
  p_retention bigint, p_nonce text, p_trace text,
  out code int, out fence bigint, out token text, out lease_until bigint, out claims integer,
  out detail text, out result text, out trace text, out remaining bigint, out layout smallint,
  out approved boolean, out approval_at bigint, out approval_until bigint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  v_state text;
  v_phase text;
begin
  loop
    -- A record born now. A concurrent claim of the same key waits here for the winner, then reads its row.
    insert into ${records} as t (key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at,
      updated_at, trace, expires_at)
    values (p_key, 'claimed', p_phase, 1, '1.' || p_nonce, v_now + p_lease, p_fp, p_tool, 1, v_now, v_now,
      nullif(p_trace, ''), v_now + p_retention)
    on conflict (key) do nothing;
    if found then
      code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
      return;
    end if;
    select * into r from ${records} t where t.key = p_key for update;
    exit when found;
    -- Swept between the two statements: insert again.
  end loop;

  if r.expires_at <= v_now then
    -- Expired is absent: the record starts over, as a fresh one (in the first layout: nothing was asked).
    update ${records} t set state = 'claimed', phase = p_phase, fence = 1, owner = '1.' || p_nonce,
      lease_until = v_now + p_lease, fp = p_fp, tool = p_tool, claims = 1, created_at = v_now,
      updated_at = v_now, result = null, error = null, trace = nullif(p_trace, ''), res_as = null,
      res_by = null, res_why = null, res_at = null, apr_reason = null, apr_at = null, apr_until = null,
      apr_as = null, apr_by = null, apr_why = null, apr_decided = null, layout = 1,
      expires_at = v_now + p_retention
    where t.key = p_key;
    code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
    return;
  end if;

  if r.fp <> p_fp then code := 7; detail := r.tool; return; end if;
  fence := r.fence;
  if r.state = 'done' then
    code := 4; result := r.result; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'failed' then
    code := 5; result := r.error; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'awaiting_approval' then
    if r.apr_until > v_now then
      code := 8; detail := r.apr_reason; approval_at := r.apr_at; approval_until := r.apr_until; return;
    end if;
    -- Nobody decided in time: the call fails for good, replayed to every later attempt (APPROVAL_EXPIRED_ERROR
    -- of @once/core, the same text).
    update ${records} t set state = 'failed', error = ${expired}, apr_as = 'expired', apr_decided = v_now,
      updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 5; result := ${expired}; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state in ('claimed', 'reconciling') and coalesce(r.lease_until, 0) > v_now then
    code := 6; detail := r.state; remaining := r.lease_until - v_now; return;
  end if;

  if r.state in ('released', 'approved') then code := 1; v_state := 'claimed';
  elsif r.state = 'unknown' then code := 3; v_state := 'reconciling'; detail := 'unknown';
  elsif r.state = 'claimed' and r.phase = 'prepare' then
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    code := 2; v_state := 'claimed';
  elsif r.state in ('claimed', 'reconciling') then code := 3; v_state := 'reconciling'; detail := r.state;
  else
    raise exception 'ONCE_CORRUPT record % has state %', p_key, r.state;
  end if;
  -- A reconciler always works in the effect phase: the effect may already have happened.
  v_phase := case when v_state = 'claimed' then p_phase else 'effect' end;
  fence := r.fence + 1;
  token := fence || '.' || p_nonce;
  lease_until := v_now + p_lease;
  claims := r.claims + 1;
  -- A person's yes is used by the owner that runs the effect: it is not asked again.
  approved := r.apr_as is not distinct from 'approved';
  update ${records} t set state = v_state, phase = v_phase, fence = claim.fence, owner = claim.token,
    lease_until = claim.lease_until, claims = claim.claims, updated_at = v_now,
    trace = coalesce(nullif(p_trace, ''), t.trace), expires_at = v_now + p_retention
  where t.key = p_key;
end
$fn$;

-- claimed -> awaiting_approval, by the owner: the key is given up and the request kept. Asked once per record.
create function ${fn("request_approval")}(p_key text, p_token text, p_reason text, p_ttl bigint,
  p_retention bigint, out code int, out fence bigint, out detail text, out approval_at bigint,
  out approval_until bigint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
begin${owned(["claimed"])}
  if r.apr_at is not null then
    code := 12; detail := 'an approval was requested for this record before'; return;
  end if;
  update ${records} t set state = 'awaiting_approval', owner = null, lease_until = null, result = null,
    error = null, apr_reason = p_reason, apr_at = v_now, apr_until = v_now + p_ttl, layout = 2,
    updated_at = v_now, expires_at = v_now + p_retention
  where t.key = p_key;
  code := 10; fence := r.fence; approval_at := v_now; approval_until := v_now + p_ttl;
end
$fn$;

-- awaiting_approval -> approved | failed (denied), by a person. Fence + 1; bound to the fence and fingerprint
-- the person saw; who, when and why kept.
create function ${fn("decide")}(p_key text, p_decision text, p_error text, p_by text, p_why text,
  p_expect_fence bigint, p_fp text, p_retention bigint,
  out code int, out fence bigint, out lease_until bigint, out detail text)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
begin
  select * into r from ${records} t where t.key = p_key and t.expires_at > v_now for update;
  if not found then code := 12; detail := 'no record'; return; end if;
  if r.state <> 'awaiting_approval' then
    code := 12; detail := 'state is ' || r.state || ', not awaiting_approval'; return;
  end if;
  if r.apr_until <= v_now then code := 12; detail := 'the approval request expired'; return; end if;
  if p_expect_fence <> r.fence then
    code := 12; detail := 'fence is ' || r.fence || ', expected ' || p_expect_fence; return;
  end if;
  if p_fp <> r.fp then code := 12; detail := 'the fingerprint is another call''s'; return; end if;
  if p_decision not in ('approved', 'denied') then
    raise exception 'ONCE_BAD_ARGUMENT unknown decision %', p_decision;
  end if;
  update ${records} t set state = case p_decision when 'approved' then 'approved' else 'failed' end,
    error = case p_decision when 'denied' then p_error end, fence = r.fence + 1, apr_as = p_decision,
    apr_by = p_by, apr_why = p_why, apr_decided = v_now, updated_at = v_now, expires_at = v_now + p_retention
  where t.key = p_key;
  code := 10; fence := r.fence + 1;
end
$fn$;
`;
  // Tasks and their cancellation (docs/cancellation.md). The claim's new parameters have defaults, so a process
  // of the build before, still calling it with eight, goes on working (a claim naming no task). A claim that names its task is filed under it: the row
  // gets the task's key (`task_key`, deriveTaskKey's) and its place in the order of filing (`filed`, from a
  // sequence, so filing writes nothing shared), and, unless the store keeps no identities, the call's namespace,
  // task id and step id. A task's row holds its cancellation. The claim holds that row for share while it decides
  // and the cancel takes it for update, so a claim is wholly before a cancel or wholly after it: no claim of a
  // task is granted once cancel_task has committed. Lock order everywhere: the task row, then record rows.
  // A row the cancel reached (state `cancelled`, or a running effect told to stop) is at layout 3; a reader of
  // layout 2 refuses it instead of failing on the state or losing the cancellation.
  const tasks = n.q("tasks");
  const filing = n.q("filing");
  const v4 = `
create table ${tasks} (
  task_key text primary key,
  namespace text,
  task_id text,
  cancel_by text,
  cancel_why text,
  cancel_at bigint,
  expires_at bigint not null
);
create index "${n.tablePrefix}tasks_expires_at" on ${tasks} (expires_at);
create sequence ${filing};

alter table ${records} add column ns text, add column task_id text, add column step_id text,
  add column task_key text, add column filed bigint, add column cancel_by text, add column cancel_why text,
  add column cancel_at bigint;
create index "${n.tablePrefix}records_task" on ${records} (task_key, filed) where task_key is not null;
alter table ${records} drop constraint "${n.tablePrefix}records_state_check";
alter table ${records} add constraint "${n.tablePrefix}records_state_check" check (state in ('claimed',
  'reconciling', 'released', 'done', 'failed', 'unknown', 'awaiting_approval', 'approved', 'cancelled'));

drop function ${fn("claim")}(text, text, text, text, bigint, bigint, text, text);
create function ${fn("claim")}(p_key text, p_fp text, p_tool text, p_phase text, p_lease bigint,
  p_retention bigint, p_nonce text, p_trace text, p_task_key text default null, p_ns text default null,
  p_task_id text default null, p_step_id text default null,
  out code int, out fence bigint, out token text, out lease_until bigint, out claims integer, out detail text,
  out result text, out trace text, out remaining bigint, out layout smallint, out approved boolean,
  out approval_at bigint, out approval_until bigint, out cancelled_by text, out cancelled_why text,
  out cancelled_at bigint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  tk ${tasks}%rowtype;
  v_state text;
  v_phase text;
  v_held boolean := false;
begin
  if p_task_key is not null then
    select * into tk from ${tasks} t where t.task_key = p_task_key;
    if found and tk.cancel_at is null and tk.expires_at > v_now + p_retention / 2 then
      -- A live task, not cancelled: held for share, so claims of its steps go on side by side while a cancel
      -- (which takes the row for update) waits for them, and they for it. Cancelled since the read above:
      -- refused below (that cancel has just refreshed the row).
      select * into tk from ${tasks} t where t.task_key = p_task_key for share;
      v_held := found;
    end if;
    if not v_held then
      -- A new task, one whose row has expired (its cancellation with it) or is half way there, or a cancelled
      -- one (every claim it refuses refreshes it): written, and so held for update.
      insert into ${tasks} as t (task_key, namespace, task_id, expires_at)
      values (p_task_key, p_ns, p_task_id, v_now + p_retention)
      on conflict (task_key) do update set
        namespace = coalesce(excluded.namespace, t.namespace), task_id = coalesce(excluded.task_id, t.task_id),
        cancel_by = case when t.expires_at > v_now then t.cancel_by end,
        cancel_why = case when t.expires_at > v_now then t.cancel_why end,
        cancel_at = case when t.expires_at > v_now then t.cancel_at end,
        expires_at = v_now + p_retention
      returning * into tk;
    end if;
    if tk.cancel_at is not null then
      code := 9; cancelled_by := tk.cancel_by; cancelled_why := tk.cancel_why; cancelled_at := tk.cancel_at;
      select t.fence into fence from ${records} t where t.key = p_key and t.expires_at > v_now;
      fence := coalesce(fence, 0);
      return;
    end if;
  end if;

  loop
    -- A record born now. A concurrent claim of the same key waits here for the winner, then reads its row.
    insert into ${records} as t (key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at,
      updated_at, trace, expires_at, ns, task_id, step_id, task_key, filed)
    values (p_key, 'claimed', p_phase, 1, '1.' || p_nonce, v_now + p_lease, p_fp, p_tool, 1, v_now, v_now,
      nullif(p_trace, ''), v_now + p_retention, p_ns, p_task_id, p_step_id, p_task_key,
      case when p_task_key is not null then nextval('${filing}') end)
    on conflict (key) do nothing;
    if found then
      code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
      return;
    end if;
    select * into r from ${records} t where t.key = p_key for update;
    exit when found;
    -- Swept between the two statements: insert again.
  end loop;

  if r.expires_at <= v_now then
    -- Expired is absent: the record starts over, as a fresh one (in the first layout: nothing was asked, and
    -- no cancel reached it), filed anew.
    update ${records} t set state = 'claimed', phase = p_phase, fence = 1, owner = '1.' || p_nonce,
      lease_until = v_now + p_lease, fp = p_fp, tool = p_tool, claims = 1, created_at = v_now,
      updated_at = v_now, result = null, error = null, trace = nullif(p_trace, ''), res_as = null,
      res_by = null, res_why = null, res_at = null, apr_reason = null, apr_at = null, apr_until = null,
      apr_as = null, apr_by = null, apr_why = null, apr_decided = null, ns = p_ns, task_id = p_task_id,
      step_id = p_step_id, task_key = p_task_key,
      filed = case when p_task_key is not null then nextval('${filing}') end, cancel_by = null,
      cancel_why = null, cancel_at = null, layout = 1, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
    return;
  end if;

  fence := r.fence;
  -- A cancelled record answers every claim, whatever its fingerprint; one whose effect was running when its task
  -- was cancelled answers every claim of the task, even after the task's row has expired: it stays cancelled
  -- while the record lives.
  if r.state = 'cancelled' or (p_task_key is not null and r.cancel_at is not null) then
    code := 9; cancelled_by := r.cancel_by; cancelled_why := r.cancel_why; cancelled_at := r.cancel_at;
    layout := r.layout; return;
  end if;
  if r.fp <> p_fp then code := 7; detail := r.tool; return; end if;
  if p_task_key is not null and r.task_key is null then
    -- Claimed before without its task: filed now, so the task's cancel reaches it and its reader lists it.
    update ${records} t set task_key = p_task_key, filed = nextval('${filing}'), ns = p_ns,
      task_id = p_task_id, step_id = p_step_id
    where t.key = p_key;
  end if;
  if r.state = 'done' then
    code := 4; result := r.result; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'failed' then
    code := 5; result := r.error; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'awaiting_approval' then
    if r.apr_until > v_now then
      code := 8; detail := r.apr_reason; approval_at := r.apr_at; approval_until := r.apr_until; return;
    end if;
    -- Nobody decided in time: the call fails for good, replayed to every later attempt (APPROVAL_EXPIRED_ERROR
    -- of @once/core, the same text).
    update ${records} t set state = 'failed', error = ${expired}, apr_as = 'expired', apr_decided = v_now,
      updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 5; result := ${expired}; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state in ('claimed', 'reconciling') and coalesce(r.lease_until, 0) > v_now then
    code := 6; detail := r.state; remaining := r.lease_until - v_now; return;
  end if;

  if r.state in ('released', 'approved') then code := 1; v_state := 'claimed';
  elsif r.state = 'unknown' then code := 3; v_state := 'reconciling'; detail := 'unknown';
  elsif r.state = 'claimed' and r.phase = 'prepare' then
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    code := 2; v_state := 'claimed';
  elsif r.state in ('claimed', 'reconciling') then code := 3; v_state := 'reconciling'; detail := r.state;
  else
    raise exception 'ONCE_CORRUPT record % has state %', p_key, r.state;
  end if;
  -- A reconciler always works in the effect phase: the effect may already have happened.
  v_phase := case when v_state = 'claimed' then p_phase else 'effect' end;
  fence := r.fence + 1;
  token := fence || '.' || p_nonce;
  lease_until := v_now + p_lease;
  claims := r.claims + 1;
  -- A person's yes is used by the owner that runs the effect: it is not asked again.
  approved := r.apr_as is not distinct from 'approved';
  update ${records} t set state = v_state, phase = v_phase, fence = claim.fence, owner = claim.token,
    lease_until = claim.lease_until, claims = claim.claims, updated_at = v_now,
    trace = coalesce(nullif(p_trace, ''), t.trace), expires_at = v_now + p_retention
  where t.key = p_key;
end
$fn$;

-- The owner of an effect whose task was cancelled while it ran is told so by its next heartbeat.
drop function ${fn("heartbeat")}(text, text, bigint, bigint);
create function ${fn("heartbeat")}(p_key text, p_token text, p_lease bigint, p_retention bigint,
  out code int, out fence bigint, out lease_until bigint, out detail text, out cancel_requested boolean)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
begin${owned(["claimed", "reconciling"])}
  -- the lease is a field; when it runs out the record stays and the next claim decides.
  update ${records} t set lease_until = v_now + p_lease, updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
  code := 10; fence := r.fence; lease_until := v_now + p_lease; cancel_requested := r.cancel_at is not null;
end
$fn$;

-- Cancels a task, once: its row for update (waiting for every claim holding it), the cancellation kept, then
-- every call filed under it. Not yet in the effect phase: cancelled, fence + 1, owner and lease cleared, so the
-- owner's next write is lost. Effect running (claimed in the effect phase, reconciling, unknown): state
-- unchanged, the cancellation kept, told at the next heartbeat. Settled (done, failed, cancelled): unchanged.
-- A second cancel answers the first one's who, why and when and changes nothing.
create function ${fn("cancel_task")}(p_task_key text, p_ns text, p_task_id text, p_by text, p_why text,
  p_retention bigint, out outcome text, out cancelled_by text, out cancelled_why text,
  out cancelled_at bigint, out stopped text[], out running text[])
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  tk ${tasks}%rowtype;
begin
  loop
    select * into tk from ${tasks} t where t.task_key = p_task_key for update;
    exit when found;
    -- A concurrent first claim or cancel waits here for the other's insert, then locks its row.
    insert into ${tasks} (task_key, namespace, task_id, expires_at)
    values (p_task_key, p_ns, p_task_id, v_now + p_retention)
    on conflict (task_key) do nothing;
  end loop;
  if tk.cancel_at is not null and tk.expires_at > v_now then
    outcome := 'already_cancelled'; cancelled_by := tk.cancel_by; cancelled_why := tk.cancel_why;
    cancelled_at := tk.cancel_at; stopped := '{}'; running := '{}';
    return;
  end if;
  update ${tasks} t set namespace = coalesce(p_ns, t.namespace), task_id = coalesce(p_task_id, t.task_id),
    cancel_by = p_by, cancel_why = p_why, cancel_at = v_now, expires_at = v_now + p_retention
  where t.task_key = p_task_key;
  outcome := 'cancelled'; cancelled_by := p_by; cancelled_why := p_why; cancelled_at := v_now;
  with c as (
    update ${records} t set state = 'cancelled', fence = t.fence + 1, owner = null, lease_until = null,
      cancel_by = p_by, cancel_why = p_why, cancel_at = v_now, layout = 3, updated_at = v_now,
      expires_at = v_now + p_retention
    where t.task_key = p_task_key and t.expires_at > v_now
      and (t.state in ('released', 'awaiting_approval', 'approved') or (t.state = 'claimed' and t.phase = 'prepare'))
    returning t.key, t.filed)
  select coalesce(array_agg(c.key order by c.filed, c.key), '{}') into stopped from c;
  with c as (
    update ${records} t set cancel_by = p_by, cancel_why = p_why, cancel_at = v_now, layout = 3,
      updated_at = v_now, expires_at = v_now + p_retention
    where t.task_key = p_task_key and t.expires_at > v_now
      and (t.state in ('reconciling', 'unknown') or (t.state = 'claimed' and t.phase = 'effect'))
    returning t.key, t.filed)
  select coalesce(array_agg(c.key order by c.filed, c.key), '{}') into running from c;
end
$fn$;
`;
  // Liveness per process (docs/protocol.md, "Liveness"): a row per process that owns claims; a claim names
  // it (records.live), and the claim function reads it: gone, the owner's lease is not waited out.
  const liveness = n.q("liveness");
  const v5 = `
create table ${liveness} (
  id text primary key,
  expires_at bigint not null
);
create index "${n.tablePrefix}liveness_expires_at" on ${liveness} (expires_at);
alter table ${records} add column live text;

-- Opens a process's entry, only when none of that id is alive; entries run out are cleared on the way.
create function ${fn("liveness_open")}(p_id text, p_ttl bigint, out opened boolean)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
begin
  delete from ${liveness} l where l.expires_at <= v_now;
  insert into ${liveness} (id, expires_at) values (p_id, v_now + p_ttl) on conflict (id) do nothing;
  opened := found;
end
$fn$;

-- Extends an entry that is alive; one that ran out, or that a claim deleted, is not brought back.
create function ${fn("liveness_renew")}(p_id text, p_ttl bigint, out renewed boolean)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
begin
  update ${liveness} l set expires_at = v_now + p_ttl where l.id = p_id and l.expires_at > v_now;
  renewed := found;
end
$fn$;

create function ${fn("liveness_end")}(p_id text, out ended boolean)
language plpgsql as $fn$
begin
  delete from ${liveness} l where l.id = p_id;
  ended := true;
end
$fn$;

drop function ${fn("claim")}(text, text, text, text, bigint, bigint, text, text, text, text, text, text);
create function ${fn("claim")}(p_key text, p_fp text, p_tool text, p_phase text, p_lease bigint,
  p_retention bigint, p_nonce text, p_trace text, p_task_key text default null, p_ns text default null,
  p_task_id text default null, p_step_id text default null, p_live text default null,
  out code int, out fence bigint, out token text, out lease_until bigint, out claims integer, out detail text,
  out result text, out trace text, out remaining bigint, out layout smallint, out approved boolean,
  out approval_at bigint, out approval_until bigint, out cancelled_by text, out cancelled_why text,
  out cancelled_at bigint)
language plpgsql as $fn$
declare
  v_now bigint := ${fn("now_ms")}();
  r ${records}%rowtype;
  tk ${tasks}%rowtype;
  v_state text;
  v_phase text;
  v_held boolean := false;
  v_live_until bigint;
begin
  if p_task_key is not null then
    select * into tk from ${tasks} t where t.task_key = p_task_key;
    if found and tk.cancel_at is null and tk.expires_at > v_now + p_retention / 2 then
      -- A live task, not cancelled: held for share, so claims of its steps go on side by side while a cancel
      -- (which takes the row for update) waits for them, and they for it. Cancelled since the read above:
      -- refused below (that cancel has just refreshed the row).
      select * into tk from ${tasks} t where t.task_key = p_task_key for share;
      v_held := found;
    end if;
    if not v_held then
      -- A new task, one whose row has expired (its cancellation with it) or is half way there, or a cancelled
      -- one (every claim it refuses refreshes it): written, and so held for update.
      insert into ${tasks} as t (task_key, namespace, task_id, expires_at)
      values (p_task_key, p_ns, p_task_id, v_now + p_retention)
      on conflict (task_key) do update set
        namespace = coalesce(excluded.namespace, t.namespace), task_id = coalesce(excluded.task_id, t.task_id),
        cancel_by = case when t.expires_at > v_now then t.cancel_by end,
        cancel_why = case when t.expires_at > v_now then t.cancel_why end,
        cancel_at = case when t.expires_at > v_now then t.cancel_at end,
        expires_at = v_now + p_retention
      returning * into tk;
    end if;
    if tk.cancel_at is not null then
      code := 9; cancelled_by := tk.cancel_by; cancelled_why := tk.cancel_why; cancelled_at := tk.cancel_at;
      select t.fence into fence from ${records} t where t.key = p_key and t.expires_at > v_now;
      fence := coalesce(fence, 0);
      return;
    end if;
  end if;

  loop
    -- A record born now. A concurrent claim of the same key waits here for the winner, then reads its row.
    insert into ${records} as t (key, state, phase, fence, owner, lease_until, fp, tool, claims, created_at,
      updated_at, trace, expires_at, ns, task_id, step_id, task_key, filed, live)
    values (p_key, 'claimed', p_phase, 1, '1.' || p_nonce, v_now + p_lease, p_fp, p_tool, 1, v_now, v_now,
      nullif(p_trace, ''), v_now + p_retention, p_ns, p_task_id, p_step_id, p_task_key,
      case when p_task_key is not null then nextval('${filing}') end, p_live)
    on conflict (key) do nothing;
    if found then
      code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
      return;
    end if;
    select * into r from ${records} t where t.key = p_key for update;
    exit when found;
    -- Swept between the two statements: insert again.
  end loop;

  if r.expires_at <= v_now then
    -- Expired is absent: the record starts over, as a fresh one (in the first layout: nothing was asked, and
    -- no cancel reached it), filed anew.
    update ${records} t set state = 'claimed', phase = p_phase, fence = 1, owner = '1.' || p_nonce,
      lease_until = v_now + p_lease, fp = p_fp, tool = p_tool, claims = 1, created_at = v_now,
      updated_at = v_now, result = null, error = null, trace = nullif(p_trace, ''), res_as = null,
      res_by = null, res_why = null, res_at = null, apr_reason = null, apr_at = null, apr_until = null,
      apr_as = null, apr_by = null, apr_why = null, apr_decided = null, ns = p_ns, task_id = p_task_id,
      step_id = p_step_id, task_key = p_task_key,
      filed = case when p_task_key is not null then nextval('${filing}') end, cancel_by = null,
      cancel_why = null, cancel_at = null, layout = 1, live = p_live, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 1; fence := 1; token := '1.' || p_nonce; lease_until := v_now + p_lease; claims := 1;
    return;
  end if;

  fence := r.fence;
  -- A cancelled record answers every claim, whatever its fingerprint; one whose effect was running when its task
  -- was cancelled answers every claim of the task, even after the task's row has expired: it stays cancelled
  -- while the record lives.
  if r.state = 'cancelled' or (p_task_key is not null and r.cancel_at is not null) then
    code := 9; cancelled_by := r.cancel_by; cancelled_why := r.cancel_why; cancelled_at := r.cancel_at;
    layout := r.layout; return;
  end if;
  if r.fp <> p_fp then code := 7; detail := r.tool; return; end if;
  if p_task_key is not null and r.task_key is null then
    -- Claimed before without its task: filed now, so the task's cancel reaches it and its reader lists it.
    update ${records} t set task_key = p_task_key, filed = nextval('${filing}'), ns = p_ns,
      task_id = p_task_id, step_id = p_step_id
    where t.key = p_key;
  end if;
  if r.state = 'done' then
    code := 4; result := r.result; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'failed' then
    code := 5; result := r.error; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state = 'awaiting_approval' then
    if r.apr_until > v_now then
      code := 8; detail := r.apr_reason; approval_at := r.apr_at; approval_until := r.apr_until; return;
    end if;
    -- Nobody decided in time: the call fails for good, replayed to every later attempt (APPROVAL_EXPIRED_ERROR
    -- of @once/core, the same text).
    update ${records} t set state = 'failed', error = ${expired}, apr_as = 'expired', apr_decided = v_now,
      updated_at = v_now, expires_at = v_now + p_retention
    where t.key = p_key;
    code := 5; result := ${expired}; trace := r.trace; layout := r.layout; return;
  end if;
  if r.state in ('claimed', 'reconciling') and coalesce(r.lease_until, 0) > v_now then
    if r.live is null then
      code := 6; detail := r.state; remaining := r.lease_until - v_now; return;
    end if;
    -- The owner named its process's liveness entry. One run out is deleted here, so that a renew waiting
    -- for it finds it gone (never brought back), and a renew that committed first keeps it alive.
    delete from ${liveness} l where l.id = r.live and l.expires_at <= v_now;
    select l.expires_at into v_live_until from ${liveness} l where l.id = r.live and l.expires_at > v_now;
    if v_live_until is not null then
      -- The owner's process is alive: its lease holds; come back when the lease or the entry runs out.
      code := 6; detail := r.state; remaining := least(r.lease_until, v_live_until) - v_now; return;
    end if;
    -- The entry is gone: the owner's process died or stalled past it, and its lease is not waited out.
  end if;

  if r.state in ('released', 'approved') then code := 1; v_state := 'claimed';
  elsif r.state = 'unknown' then code := 3; v_state := 'reconciling'; detail := 'unknown';
  elsif r.state = 'claimed' and r.phase = 'prepare' then
    -- Nothing has touched the outside world in the prepare phase, so a new owner may simply start over.
    code := 2; v_state := 'claimed';
  elsif r.state in ('claimed', 'reconciling') then code := 3; v_state := 'reconciling'; detail := r.state;
  else
    raise exception 'ONCE_CORRUPT record % has state %', p_key, r.state;
  end if;
  -- A reconciler always works in the effect phase: the effect may already have happened.
  v_phase := case when v_state = 'claimed' then p_phase else 'effect' end;
  fence := r.fence + 1;
  token := fence || '.' || p_nonce;
  lease_until := v_now + p_lease;
  claims := r.claims + 1;
  -- A person's yes is used by the owner that runs the effect: it is not asked again.
  approved := r.apr_as is not distinct from 'approved';
  update ${records} t set state = v_state, phase = v_phase, fence = claim.fence, owner = claim.token,
    lease_until = claim.lease_until, claims = claim.claims, updated_at = v_now, live = p_live,
    trace = coalesce(nullif(p_trace, ''), t.trace), expires_at = v_now + p_retention
  where t.key = p_key;
end
$fn$;

`;
  return [
    { version: 1, description: "records, and one function per transition", sql: v1 },
    { version: 2, description: "every record says its layout; the claim replays it", sql: v2 },
    { version: 3, description: "approval requests and their decisions", sql: v3 },
    { version: 4, description: "tasks: calls filed under their task, and its cancellation", sql: v4 },
    { version: 5, description: "liveness per process: an entry per process, named by its claims", sql: v5 },
  ];
}

/** The newest schema version this build knows. */
export const SCHEMA_VERSION = 5;
