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
  return [{ version: 1, description: "records, and one function per transition", sql: v1 }];
}

/** The newest schema version this build knows. */
export const SCHEMA_VERSION = 1;
