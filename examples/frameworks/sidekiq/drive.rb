# frozen_string_literal: true

# The client side of the Sidekiq tests, through Sidekiq's own API (the
# worker side is the `sidekiq` executable on jobs.rb). One command per run,
# its result printed as one JSON line:
#
#   enqueue QUEUE GATE N         N GateJobs on QUEUE; prints their jids
#   schedule QUEUE GATE AT N     N GateJobs in `schedule` due at AT (epoch s,
#                                past allowed: the client writes it as given)
#   stats                        what Sidekiq's API reports, without pruning
#   prune                        Sidekiq::ProcessSet's cleanup of dead processes
#
# REDIS_URL names the server, as for Sidekiq itself.
require "json"
require "sidekiq"
require "sidekiq/api"
require_relative "jobs"

def enqueue(queue, gate, n, at = nil)
  item = {"class" => GateJob, "queue" => queue, "args" => Array.new(n) { [gate] }}
  item["at"] = at if at
  Sidekiq::Client.push_bulk(item)
end

def stats
  s = Sidekiq::Stats.new
  s.fetch_stats_slow!
  # false: ProcessSet.new would otherwise prune dead processes itself.
  procs = Sidekiq::ProcessSet.new(false).map { |p| {"identity" => p["identity"], "busy" => p["busy"], "beat" => p["beat"]} }
  work = Sidekiq::Workers.new.map { |process, tid, w| {"process" => process, "tid" => tid, "jid" => w["payload"]["jid"], "queue" => w["queue"], "run_at" => w["run_at"]} }
  queues = Sidekiq::Queue.all.to_h { |q| [q.name, {"size" => q.size, "latency" => q.latency}] }
  {
    "enqueued" => s.enqueued, "scheduled" => s.scheduled_size, "retry" => s.retry_size, "dead" => s.dead_size,
    "processes_listed" => s.processes_size, "processes" => procs, "workers_size" => s.workers_size,
    "work" => work, "queues" => queues
  }
end

cmd, *args = ARGV
out = case cmd
when "enqueue" then enqueue(args[0], args[1], Integer(args[2]))
when "schedule" then enqueue(args[0], args[1], Integer(args[3]), Float(args[2]))
when "stats" then stats
when "prune" then {"pruned" => Sidekiq::ProcessSet.new(false).cleanup}
else abort "usage: drive.rb enqueue|schedule|stats|prune ..."
end
puts JSON.generate(out)
