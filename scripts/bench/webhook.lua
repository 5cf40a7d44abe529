-- wrk script for scripts/bench-webhook-peer: POSTs one webhook payload with GitHub's headers,
-- a fresh X-GitHub-Delivery id on every request (Sandcastle answers a repeated id from its
-- delivery cache), and prints one parsable line at the end:
--   RESULT requests=… seconds=… rps=… p50_us=… p99_us=… max_us=… status_errors=… socket_errors=…
-- Arguments after `--`: PAYLOAD_FILE EVENT SIGNATURE [RATE]
-- With RATE, each wrk thread sends at most RATE requests a second, evenly spaced (an open pace
-- kept by a per-thread schedule; latency is measured from each request's send, as wrk does).

local ffi = require("ffi")
ffi.cdef [[
  typedef struct { long tv_sec; long tv_nsec; } bench_timespec;
  int clock_gettime(int clock, bench_timespec *ts);
]]
local ts = ffi.new("bench_timespec")
local function now_ms()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1000 + tonumber(ts.tv_nsec) / 1e6
end

local threads = {}
-- Distinct per wrk run (the warm-up and the measured run follow each other on one server).
ffi.C.clock_gettime(0, ts) -- CLOCK_REALTIME
local run = string.format("%x%x", tonumber(ts.tv_sec), tonumber(ts.tv_nsec))

function setup(thread)
  thread:set("id", #threads + 1)
  thread:set("run", run)
  table.insert(threads, thread)
end

-- Every request is the same bytes but for the delivery id: built once around it, so wrk spends
-- one string concatenation a request (wrk.format would rebuild the whole request).
local head, tail, counter = nil, nil, 0

function init(args)
  local f = assert(io.open(args[1], "rb"))
  local body = f:read("*a")
  f:close()
  head = "POST /github/webhook HTTP/1.1\r\n"
    .. "Host: " .. wrk.headers["Host"] .. "\r\n"
    .. "User-Agent: GitHub-Hookshot/bench\r\n"
    .. "Content-Type: application/json\r\n"
    .. "X-GitHub-Event: " .. args[2] .. "\r\n"
    .. "X-Hub-Signature-256: " .. args[3] .. "\r\n"
    .. string.format("X-GitHub-Delivery: bench-%s-%d-", run, id)
  tail = "\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body
  local rate = tonumber(args[4] or "")
  if rate and rate > 0 then
    local interval, next_at = 1000 / rate, 0
    -- wrk calls delay() before each request of a connection; the thread's requests take the
    -- next free slot of its schedule, so the thread as a whole keeps RATE.
    function delay()
      local now = now_ms()
      if next_at < now then next_at = now end
      local wait = next_at - now
      next_at = next_at + interval
      return math.floor(wait)
    end
  end
end

function request()
  counter = counter + 1
  return head .. counter .. tail
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "RESULT requests=%d seconds=%.3f rps=%.1f p50_us=%d p99_us=%d max_us=%d status_errors=%d socket_errors=%d\n",
    summary.requests, summary.duration / 1e6, summary.requests / (summary.duration / 1e6),
    latency:percentile(50), latency:percentile(99), latency.max, e.status,
    e.connect + e.read + e.write + e.timeout))
end
