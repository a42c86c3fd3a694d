-- wrk script of tests/bench/wrk.sh. With an adapter: POST /runs with a JSON
-- body, counting 201 answers and writing every answered run id to a file per
-- thread; with `health`: GET /health, counting 200 answers.
--
--   wrk -c16 -d10s -s tests/bench/wrk.lua http://127.0.0.1:PORT/runs -- ADAPTER GOAL IDS_PREFIX
--   wrk -c16 -d10s -s tests/bench/wrk.lua http://127.0.0.1:PORT/health -- health
--
-- Prints one line `RESULT rps=… p50_ms=… p99_ms=… ok=… other=… errors=…` at the end.

local threads = {}
local counter = 0

function setup(thread)
  counter = counter + 1
  thread:set("thread_number", counter)
  table.insert(threads, thread)
end

function init(args)
  local adapter = args[1] or "stub"
  local goal = args[2] or "benchmark goal"
  local prefix = args[3]
  ok = 0
  other = 0
  if adapter == "health" then
    expected = 200
    return
  end
  expected = 201
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.body = string.format('{"goal":"%s","adapter":"%s"}', goal, adapter)
  if prefix then
    ids = io.open(string.format("%s.%d", prefix, thread_number), "w")
    -- wrk never closes a thread's files: write every id through at once.
    ids:setvbuf("line")
  end
end

function response(status, headers, body)
  if status == expected then
    ok = ok + 1
    if ids then
      local id = body:match('"run_id":"([^"]+)"')
      if id then ids:write(id, "\n") end
    end
  else
    other = other + 1
  end
end

function done(summary, latency, requests)
  local ok_total, other_total = 0, 0
  for _, thread in ipairs(threads) do
    ok_total = ok_total + thread:get("ok")
    other_total = other_total + thread:get("other")
  end
  local secs = summary.duration / 1e6
  io.write(string.format("RESULT rps=%.1f p50_ms=%.2f p99_ms=%.2f ok=%d other=%d errors=%d\n",
    summary.requests / secs, latency:percentile(50) / 1000, latency:percentile(99) / 1000,
    ok_total, other_total,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.timeout))
end
