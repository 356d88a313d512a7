# frozen_string_literal: true

# The jobs the framework tests run under a real Sidekiq process
# (`sidekiq -r ./jobs.rb`). A GateJob says it started and then blocks on
# its gate, so that a test can kill its process mid-job, or open the gate
# and watch it finish, waiting on Redis rather than on the clock.
require "sidekiq"
require "redis"

class GateJob
  include Sidekiq::Worker
  # A retry would put the job back in `retry`: the tests count what the
  # framework does with a job that simply finishes, or is lost.
  sidekiq_options retry: false

  def perform(gate)
    r = Redis.new(url: ENV.fetch("REDIS_URL"))
    r.rpush("fwtest:started", jid)
    r.blpop("fwtest:gate:#{gate}", timeout: 0)
    r.rpush("fwtest:done", jid)
  ensure
    r&.close
  end
end
