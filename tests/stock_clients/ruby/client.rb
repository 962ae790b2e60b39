# Stock gRPC Ruby (Debian's ruby-grpc, gRPC's C core) against the real
# reqstate sidecar: stubs generated from proto/ by grpc_tools_ruby_protoc at
# test time (their folder is on RUBYLIB), no reqstate code. Run by
# tests/stock_clients/run.sh:
#
#   ruby client.rb unix:/path/reqstate.sock         (no bearer token)
#   ruby client.rb 127.0.0.1:PORT BEARER-TOKEN      (TCP with the bearer token)
#
# Exits non-zero at the first failed check; the last line says how many
# checks passed.
require 'grpc'
require 'grpc/health/v1/health_services_pb'
require 'google/rpc/status_pb'
require 'google/rpc/error_details_pb'
require 'reqstate/v1/reqstate_services_pb'

$passed = 0

def check(ok, what)
  unless ok
    puts "FAIL: #{what}"
    puts "ruby: #{$passed} passed, 1 failed"
    exit 1
  end
  $passed += 1
end

# Checks an RPC error's code, its google.rpc.ErrorInfo (domain "reqstate")
# and the reqstate-reason trailer.
def expect_error(reason, code)
  yield
  check(false, "expected #{reason}, got success")
rescue GRPC::BadStatus => e
  check(e.code == code, "code #{e.code} (#{e.details}), expected #{code}")
  status = e.to_rpc_status
  check(!status.nil?, 'no google.rpc.Status in grpc-status-details-bin')
  infos = status.details.select { |d| d.type_url.end_with?('google.rpc.ErrorInfo') }
  check(infos.size == 1, "ErrorInfo details: #{status.details.inspect}")
  info = Google::Rpc::ErrorInfo.decode(infos[0].value)
  check(info.reason == reason && info.domain == 'reqstate', "ErrorInfo: #{info.inspect}")
  check(e.metadata['reqstate-reason'] == reason.downcase, "reqstate-reason trailer: #{e.metadata.inspect}")
end

abort 'usage: client.rb TARGET [BEARER-TOKEN]' if ARGV.empty?
target = ARGV[0]
bearer = ARGV[1]

# [snippet ruby]
# target: "unix:/run/reqstate/reqstate.sock", or "127.0.0.1:50051" with a bearer token.
stub = Reqstate::V1::RequestState::Stub.new(target, :this_channel_is_insecure)
metadata = bearer ? { 'authorization' => "Bearer #{bearer}" } : {}
deadline = Time.now + 5
minted = stub.mint(
  Reqstate::V1::MintRequest.new(tool: 'increase-counter', step: 'confirm', state_json: '{"n":1}',
                                ttl_seconds: 60, context: 'principal=alice'),
  metadata: metadata, deadline: deadline
) # a GRPC::BadStatus on error: e.code, e.to_rpc_status (the ErrorInfo)
# ... the client echoes minted.token back in the next round ...
verified = stub.verify(
  Reqstate::V1::VerifyRequest.new(token: minted.token, tool: 'increase-counter',
                                  expected_step: 'confirm', context: 'principal=alice'),
  metadata: metadata, deadline: deadline
)
puts "refused: #{verified.reason}" unless verified.valid # an answer, not an error
# [/snippet ruby]

opts = { metadata: metadata, deadline: Time.now + 5 }
check(!minted.token.empty? && minted.key_id >= 1, "mint: #{minted.inspect}")
check(minted.expires_at > minted.issued_at, "mint times: #{minted.inspect}")
check(verified.valid, "verify: #{verified.inspect}")
check(verified.state_json == '{"n":1}', "verified state: #{verified.state_json}")
check(verified.step == 'confirm' && verified.key_id == minted.key_id, "verified step/key: #{verified.inspect}")

# One character of the tag changed: the token is refused, in band.
tampered = minted.token.dup
tampered[-8] = tampered[-8] == 'A' ? 'B' : 'A'
refused = stub.verify(Reqstate::V1::VerifyRequest.new(token: tampered, tool: 'increase-counter',
                                                      context: 'principal=alice'), **opts)
check(!refused.valid && refused.reason == :REASON_AUTHENTICATION_FAILED, "tampered: #{refused.inspect}")
# The genuine token for another tool: refused the same way.
other = stub.verify(Reqstate::V1::VerifyRequest.new(token: minted.token, tool: 'other-tool',
                                                    context: 'principal=alice'), **opts)
check(!other.valid && other.reason == :REASON_AUTHENTICATION_FAILED, "other tool: #{other.inspect}")

# Batch: three tokens, verified with one wrong step.
items = (0..2).map { |i| Reqstate::V1::MintRequest.new(tool: 't', step: "s#{i}", state_json: i.to_s, ttl_seconds: 60) }
batch = stub.mint_batch(Reqstate::V1::MintBatchRequest.new(items: items), **opts)
check(batch.results.size == 3, "batch results: #{batch.results.size}")
tokens = batch.results.map { |r| r.minted&.token.to_s }
check(tokens.none?(&:empty?), "batch: #{batch.inspect}")
checks = tokens.each_with_index.map { |t, i| Reqstate::V1::VerifyRequest.new(token: t, tool: 't', expected_step: "s#{i}") }
checks << Reqstate::V1::VerifyRequest.new(token: tokens[0], tool: 't', expected_step: 'other')
vb = stub.verify_batch(Reqstate::V1::VerifyBatchRequest.new(items: checks), **opts)
check(vb.results.map(&:valid) == [true, true, true, false], "verify batch: #{vb.inspect}")
check(vb.results[0, 3].map(&:state_json) == %w[0 1 2], "batch states: #{vb.inspect}")
check(vb.results[3].reason == :REASON_WRONG_STEP, "wrong step: #{vb.results[3].inspect}")

# A malformed request is an RPC error with the standard rich details.
expect_error('INVALID_ARGUMENT', GRPC::Core::StatusCodes::INVALID_ARGUMENT) do
  stub.mint(Reqstate::V1::MintRequest.new(tool: '', step: 's', ttl_seconds: 60), **opts)
end

# Health, with no token.
health = Grpc::Health::V1::Health::Stub.new(target, :this_channel_is_insecure)
['', 'reqstate.v1.RequestState'].each do |service|
  answer = health.check(Grpc::Health::V1::HealthCheckRequest.new(service: service), deadline: Time.now + 5)
  check(answer.status == :SERVING, "health #{service.inspect}: #{answer.status}")
end

if bearer
  # Without the token: UNAUTHENTICATED.
  expect_error('UNAUTHENTICATED', GRPC::Core::StatusCodes::UNAUTHENTICATED) do
    stub.mint(Reqstate::V1::MintRequest.new(tool: 't', step: 's', ttl_seconds: 60), deadline: Time.now + 5)
  end
end
puts "ruby: #{$passed} passed, 0 failed"
