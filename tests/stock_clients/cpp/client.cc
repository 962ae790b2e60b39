// Stock gRPC C++ (Debian's libgrpc++-dev) against the real reqstate sidecar:
// stubs generated from proto/ (and grpc-proto's health.proto) by protoc and
// grpc_cpp_plugin at test time, no reqstate code. Built and run by
// tests/stock_clients/run.sh:
//
//   client unix:/path/reqstate.sock             (no bearer token)
//   client 127.0.0.1:PORT BEARER-TOKEN          (TCP with the bearer token)
//
// Exits non-zero at the first failed check; the last line says how many
// checks passed.
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "grpc/health/v1/health.grpc.pb.h"
#include "reqstate/v1/reqstate.grpc.pb.h"

namespace pb = reqstate::v1;
using grpc::health::v1::Health;
using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

static int passed = 0;

static void check(bool ok, const std::string& what) {
  if (!ok) {
    std::cout << "FAIL: " << what << "\n" << "cpp: " << passed << " passed, 1 failed" << std::endl;
    std::exit(1);
  }
  ++passed;
}

// A context with a 5 s deadline and, when given, the bearer token.
static void prepare(grpc::ClientContext& ctx, const std::string& bearer) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!bearer.empty()) ctx.AddMetadata("authorization", "Bearer " + bearer);
}

// Checks a failed call's code, that it carries the rich details
// (google.rpc.Status) and the reqstate-reason trailer.
static void expect_error(const grpc::Status& status, const grpc::ClientContext& ctx, grpc::StatusCode code,
                         const std::string& reason) {
  check(status.error_code() == code,
        "code " + std::to_string(status.error_code()) + " (" + status.error_message() + "), expected " +
            std::to_string(code));
  check(!status.error_details().empty(), "no google.rpc.Status in grpc-status-details-bin");
  check(status.error_details().find(reason) != std::string::npos, "the details do not name " + reason);
  auto trailers = ctx.GetServerTrailingMetadata();
  auto found = trailers.find("reqstate-reason");
  std::string lower = reason;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  check(found != trailers.end() && std::string(found->second.data(), found->second.size()) == lower,
        "reqstate-reason trailer is not " + lower);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::cerr << "usage: client TARGET [BEARER-TOKEN]" << std::endl;
    return 2;
  }
  const std::string target = argv[1];
  const std::string bearer = argc > 2 ? argv[2] : "";

  // [snippet cpp]
  // target: "unix:/run/reqstate/reqstate.sock", or "127.0.0.1:50051" with a bearer token.
  auto channel = grpc::CreateChannel(target, grpc::InsecureChannelCredentials());
  auto stub = reqstate::v1::RequestState::NewStub(channel);

  reqstate::v1::MintRequest mint;
  mint.set_tool("increase-counter");
  mint.set_step("confirm");
  mint.set_state_json(R"({"n":1})");
  mint.set_ttl_seconds(60);
  mint.set_context("principal=alice");
  reqstate::v1::MintResponse minted;
  grpc::ClientContext mint_ctx;
  mint_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!bearer.empty()) mint_ctx.AddMetadata("authorization", "Bearer " + bearer);
  grpc::Status status = stub->Mint(&mint_ctx, mint, &minted);
  if (!status.ok()) throw std::runtime_error(status.error_message());  // and error_code()

  // ... the client echoes minted.token() back in the next round ...
  reqstate::v1::VerifyRequest verify;
  verify.set_token(minted.token());
  verify.set_tool("increase-counter");
  verify.set_expected_step("confirm");
  verify.set_context("principal=alice");
  reqstate::v1::VerifyResponse verified;
  grpc::ClientContext verify_ctx;
  verify_ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  if (!bearer.empty()) verify_ctx.AddMetadata("authorization", "Bearer " + bearer);
  status = stub->Verify(&verify_ctx, verify, &verified);
  if (!status.ok()) throw std::runtime_error(status.error_message());
  if (!verified.valid()) {  // a refused token is an answer, not an error
    std::cout << "refused: " << reqstate::v1::Reason_Name(verified.reason()) << "\n";
  }
  // [/snippet cpp]

  check(!minted.token().empty() && minted.key_id() >= 1, "mint: " + minted.ShortDebugString());
  check(minted.expires_at() > minted.issued_at(), "mint times: " + minted.ShortDebugString());
  check(verified.valid(), "verify: " + verified.ShortDebugString());
  check(verified.state_json() == R"({"n":1})", "verified state: " + verified.state_json());
  check(verified.step() == "confirm" && verified.key_id() == minted.key_id(),
        "verified step/key: " + verified.ShortDebugString());

  // One character of the tag changed: the token is refused, in band.
  {
    std::string tampered = minted.token();
    char& c = tampered[tampered.size() - 8];
    c = c == 'A' ? 'B' : 'A';
    pb::VerifyRequest req;
    req.set_token(tampered);
    req.set_tool("increase-counter");
    req.set_context("principal=alice");
    pb::VerifyResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, bearer);
    check(stub->Verify(&ctx, req, &res).ok(), "verify tampered: RPC failed");
    check(!res.valid() && res.reason() == pb::REASON_AUTHENTICATION_FAILED, "tampered: " + res.ShortDebugString());
  }
  // The genuine token for another tool: refused the same way.
  {
    pb::VerifyRequest req;
    req.set_token(minted.token());
    req.set_tool("other-tool");
    req.set_context("principal=alice");
    pb::VerifyResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, bearer);
    check(stub->Verify(&ctx, req, &res).ok(), "verify other tool: RPC failed");
    check(!res.valid() && res.reason() == pb::REASON_AUTHENTICATION_FAILED, "other tool: " + res.ShortDebugString());
  }

  // Batch: three tokens, verified with one wrong step.
  {
    pb::MintBatchRequest req;
    for (int i = 0; i < 3; ++i) {
      auto* item = req.add_items();
      item->set_tool("t");
      item->set_step("s" + std::to_string(i));
      item->set_state_json(std::to_string(i));
      item->set_ttl_seconds(60);
    }
    pb::MintBatchResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, bearer);
    check(stub->MintBatch(&ctx, req, &res).ok(), "mint batch: RPC failed");
    check(res.results_size() == 3, "batch results: " + std::to_string(res.results_size()));
    pb::VerifyBatchRequest checks;
    for (int i = 0; i < 3; ++i) {
      check(res.results(i).has_minted() && !res.results(i).minted().token().empty(),
            "batch item: " + res.results(i).ShortDebugString());
      auto* item = checks.add_items();
      item->set_token(res.results(i).minted().token());
      item->set_tool("t");
      item->set_expected_step("s" + std::to_string(i));
    }
    auto* wrong = checks.add_items();
    wrong->set_token(res.results(0).minted().token());
    wrong->set_tool("t");
    wrong->set_expected_step("other");
    pb::VerifyBatchResponse verified_batch;
    grpc::ClientContext vctx;
    prepare(vctx, bearer);
    check(stub->VerifyBatch(&vctx, checks, &verified_batch).ok(), "verify batch: RPC failed");
    check(verified_batch.results_size() == 4, "verify batch results");
    for (int i = 0; i < 3; ++i) {
      const auto& r = verified_batch.results(i);
      check(r.valid() && r.state_json() == std::to_string(i), "batch verify: " + r.ShortDebugString());
    }
    const auto& r = verified_batch.results(3);
    check(!r.valid() && r.reason() == pb::REASON_WRONG_STEP, "wrong step: " + r.ShortDebugString());
  }

  // A malformed request is an RPC error with the standard rich details.
  {
    pb::MintRequest req;
    req.set_step("s");
    req.set_ttl_seconds(60);
    pb::MintResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, bearer);
    expect_error(stub->Mint(&ctx, req, &res), ctx, grpc::StatusCode::INVALID_ARGUMENT, "INVALID_ARGUMENT");
  }

  // Health, with no token.
  auto health = Health::NewStub(channel);
  for (const std::string service : {"", "reqstate.v1.RequestState"}) {
    HealthCheckRequest req;
    req.set_service(service);
    HealthCheckResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, "");
    auto st = health->Check(&ctx, req, &res);
    check(st.ok(), "health '" + service + "': " + st.error_message());
    check(res.status() == HealthCheckResponse::SERVING, "health '" + service + "' not SERVING");
  }

  if (!bearer.empty()) {
    // Without the token: UNAUTHENTICATED.
    pb::MintRequest req;
    req.set_tool("t");
    req.set_step("s");
    req.set_ttl_seconds(60);
    pb::MintResponse res;
    grpc::ClientContext ctx;
    prepare(ctx, "");
    expect_error(stub->Mint(&ctx, req, &res), ctx, grpc::StatusCode::UNAUTHENTICATED, "UNAUTHENTICATED");
  }
  std::cout << "cpp: " << passed << " passed, 0 failed" << std::endl;
  return 0;
}
