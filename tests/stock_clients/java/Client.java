// Stock grpc-java (Debian's libgrpc-java, grpc-netty) against the real
// reqstate sidecar: stubs generated from proto/ (and grpc-proto's
// health.proto) by protoc and grpc_java_plugin at test time, no reqstate code.
// Built with one javac call and run by tests/stock_clients/run.sh:
//
//   java Client 127.0.0.1:PORT BEARER-TOKEN     (TCP with the bearer token)
//   java Client unix:/path/reqstate.sock        (netty's epoll domain sockets)
//
// Exits non-zero at the first failed check; the last line says how many
// checks passed. Exit 3: the Unix socket cannot be used with these jars
// (Debian's netty has the epoll classes but not their native library).

import com.google.protobuf.ByteString;
import com.google.protobuf.UnknownFieldSet;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.health.v1.HealthCheckRequest;
import io.grpc.health.v1.HealthCheckResponse;
import io.grpc.health.v1.HealthGrpc;
import io.grpc.netty.NettyChannelBuilder;
import io.grpc.protobuf.StatusProto;
import io.grpc.stub.MetadataUtils;
import io.netty.channel.epoll.Epoll;
import io.netty.channel.epoll.EpollDomainSocketChannel;
import io.netty.channel.epoll.EpollEventLoopGroup;
import io.netty.channel.unix.DomainSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import reqstate.v1.Reqstate.MintBatchRequest;
import reqstate.v1.Reqstate.MintBatchResponse;
import reqstate.v1.Reqstate.MintRequest;
import reqstate.v1.Reqstate.MintResponse;
import reqstate.v1.Reqstate.Reason;
import reqstate.v1.Reqstate.VerifyBatchRequest;
import reqstate.v1.Reqstate.VerifyBatchResponse;
import reqstate.v1.Reqstate.VerifyRequest;
import reqstate.v1.Reqstate.VerifyResponse;
import reqstate.v1.RequestStateGrpc;

public final class Client {
  private static int passed = 0;

  private static void check(boolean ok, String what) {
    if (!ok) {
      System.out.println("FAIL: " + what);
      System.out.println("java: " + passed + " passed, 1 failed");
      System.exit(1);
    }
    passed++;
  }

  /** Checks an RPC error's code, its google.rpc.ErrorInfo and the reqstate-reason trailer. */
  private static void expectError(Supplier<Object> call, Status.Code code, String reason) throws Exception {
    try {
      call.get();
      check(false, "expected " + code + ", got success");
    } catch (StatusRuntimeException e) {
      check(e.getStatus().getCode() == code, "code " + e.getStatus() + ", expected " + code);
      com.google.rpc.Status status = StatusProto.fromThrowable(e);
      check(status != null, "no google.rpc.Status in grpc-status-details-bin");
      // Debian's proto-google-common-protos (1.16) predates com.google.rpc.ErrorInfo: read its
      // two string fields (1 reason, 2 domain) with protobuf's own UnknownFieldSet.
      List<UnknownFieldSet> infos = new ArrayList<>();
      for (com.google.protobuf.Any detail : status.getDetailsList()) {
        if (detail.getTypeUrl().equals("type.googleapis.com/google.rpc.ErrorInfo")) {
          infos.add(UnknownFieldSet.parseFrom(detail.getValue()));
        }
      }
      check(infos.size() == 1 && field(infos.get(0), 1).equals(reason)
          && field(infos.get(0), 2).equals("reqstate"), "ErrorInfo: " + infos);
      String trailer = e.getTrailers().get(Metadata.Key.of("reqstate-reason", Metadata.ASCII_STRING_MARSHALLER));
      check(reason.toLowerCase(Locale.ROOT).equals(trailer), "reqstate-reason trailer: " + trailer);
    }
  }

  /** A string field of a message read as an UnknownFieldSet ("" when absent). */
  private static String field(UnknownFieldSet message, int number) {
    List<ByteString> values = message.getField(number).getLengthDelimitedList();
    return values.size() == 1 ? values.get(0).toStringUtf8() : "";
  }

  public static void main(String[] args) throws Exception {
    if (args.length < 1) {
      System.err.println("usage: Client TARGET [BEARER-TOKEN]");
      System.exit(2);
    }
    String target = args[0];
    String bearer = args.length > 1 ? args[1] : null;

    if (target.startsWith("unix:")) {
      if (!Epoll.isAvailable()) {
        Throwable cause = Epoll.unavailabilityCause();
        System.out.println("java: no Unix socket: netty's epoll transport is unavailable: " + cause);
        // What Debian's libnetty-java lacks: the native library, not the classes.
        boolean noNative = false;
        for (Throwable t = cause; t != null; t = t.getCause()) {
          noNative |= t instanceof UnsatisfiedLinkError;
        }
        check(noNative, "epoll is unavailable for another reason than its missing native library");
        System.exit(3);
      }
      runAndClose(NettyChannelBuilder.forAddress(new DomainSocketAddress(target.substring("unix:".length())))
          .channelType(EpollDomainSocketChannel.class)
          .eventLoopGroup(new EpollEventLoopGroup(1))
          .usePlaintext()
          .build(), bearer);
    } else {
      // [snippet java]
      // target: "127.0.0.1:50051", with the sidecar's bearer token.
      ManagedChannel channel = ManagedChannelBuilder.forTarget(target).usePlaintext().build();
      // [/snippet java]
      runAndClose(channel, bearer);
    }
    System.out.println("java: " + passed + " passed, 0 failed");
  }

  private static void runAndClose(ManagedChannel channel, String bearer) throws Exception {
    try {
      run(channel, bearer);
    } finally {
      channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
    }
  }

  private static void run(ManagedChannel channel, String bearer) throws Exception {
    // [snippet java]
    Metadata headers = new Metadata();
    if (bearer != null) {
      headers.put(Metadata.Key.of("authorization", Metadata.ASCII_STRING_MARSHALLER), "Bearer " + bearer);
    }
    RequestStateGrpc.RequestStateBlockingStub stub = RequestStateGrpc.newBlockingStub(channel)
        .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(headers))
        .withDeadlineAfter(5, TimeUnit.SECONDS);
    // A StatusRuntimeException on error: getStatus(), and StatusProto.fromThrowable(e) for the ErrorInfo.
    MintResponse minted = stub.mint(MintRequest.newBuilder()
        .setTool("increase-counter").setStep("confirm").setStateJson("{\"n\":1}").setTtlSeconds(60)
        .setContext(ByteString.copyFromUtf8("principal=alice")).build());
    // ... the client echoes minted.getToken() back in the next round ...
    VerifyResponse verified = stub.verify(VerifyRequest.newBuilder()
        .setToken(minted.getToken()).setTool("increase-counter").setExpectedStep("confirm")
        .setContext(ByteString.copyFromUtf8("principal=alice")).build());
    if (!verified.getValid()) { // a refused token is an answer, not an error
      System.out.println("refused: " + verified.getReason());
    }
    // [/snippet java]

    check(!minted.getToken().isEmpty() && minted.getKeyId() >= 1, "mint: " + minted);
    check(minted.getExpiresAt() > minted.getIssuedAt(), "mint times: " + minted);
    check(verified.getValid(), "verify: " + verified);
    check(verified.getStateJson().equals("{\"n\":1}"), "verified state: " + verified.getStateJson());
    check(verified.getStep().equals("confirm") && verified.getKeyId() == minted.getKeyId(),
        "verified step/key: " + verified);

    // One character of the tag changed: the token is refused, in band.
    char[] tampered = minted.getToken().toCharArray();
    int at = tampered.length - 8;
    tampered[at] = tampered[at] == 'A' ? 'B' : 'A';
    VerifyResponse refused = stub.verify(VerifyRequest.newBuilder().setToken(new String(tampered))
        .setTool("increase-counter").setContext(ByteString.copyFromUtf8("principal=alice")).build());
    check(!refused.getValid() && refused.getReason() == Reason.REASON_AUTHENTICATION_FAILED, "tampered: " + refused);
    // The genuine token for another tool: refused the same way.
    VerifyResponse other = stub.verify(VerifyRequest.newBuilder().setToken(minted.getToken())
        .setTool("other-tool").setContext(ByteString.copyFromUtf8("principal=alice")).build());
    check(!other.getValid() && other.getReason() == Reason.REASON_AUTHENTICATION_FAILED, "other tool: " + other);

    // Batch: three tokens, verified with one wrong step.
    MintBatchRequest.Builder items = MintBatchRequest.newBuilder();
    for (int i = 0; i < 3; i++) {
      items.addItems(MintRequest.newBuilder().setTool("t").setStep("s" + i).setStateJson(Integer.toString(i))
          .setTtlSeconds(60));
    }
    MintBatchResponse batch = stub.mintBatch(items.build());
    check(batch.getResultsCount() == 3, "batch results: " + batch.getResultsCount());
    VerifyBatchRequest.Builder checks = VerifyBatchRequest.newBuilder();
    for (int i = 0; i < 3; i++) {
      check(batch.getResults(i).hasMinted() && !batch.getResults(i).getMinted().getToken().isEmpty(),
          "batch item: " + batch.getResults(i));
      checks.addItems(VerifyRequest.newBuilder().setToken(batch.getResults(i).getMinted().getToken())
          .setTool("t").setExpectedStep("s" + i));
    }
    checks.addItems(VerifyRequest.newBuilder().setToken(batch.getResults(0).getMinted().getToken())
        .setTool("t").setExpectedStep("other"));
    VerifyBatchResponse vb = stub.verifyBatch(checks.build());
    check(vb.getResultsCount() == 4, "verify batch results: " + vb.getResultsCount());
    for (int i = 0; i < 3; i++) {
      VerifyResponse r = vb.getResults(i);
      check(r.getValid() && r.getStateJson().equals(Integer.toString(i)), "batch verify: " + r);
    }
    check(!vb.getResults(3).getValid() && vb.getResults(3).getReason() == Reason.REASON_WRONG_STEP,
        "wrong step: " + vb.getResults(3));

    // A malformed request is an RPC error with the standard rich details.
    expectError(() -> stub.mint(MintRequest.newBuilder().setTool("").setStep("s").setTtlSeconds(60).build()),
        Status.Code.INVALID_ARGUMENT, "INVALID_ARGUMENT");

    // Health, with no token.
    HealthGrpc.HealthBlockingStub health = HealthGrpc.newBlockingStub(channel);
    for (String service : new String[] {"", "reqstate.v1.RequestState"}) {
      HealthCheckResponse answer = health.withDeadlineAfter(5, TimeUnit.SECONDS)
          .check(HealthCheckRequest.newBuilder().setService(service).build());
      check(answer.getStatus() == HealthCheckResponse.ServingStatus.SERVING, "health '" + service + "': " + answer);
    }

    if (bearer != null) {
      // Without the token: UNAUTHENTICATED.
      RequestStateGrpc.RequestStateBlockingStub anonymous =
          RequestStateGrpc.newBlockingStub(channel).withDeadlineAfter(5, TimeUnit.SECONDS);
      expectError(() -> anonymous.mint(MintRequest.newBuilder().setTool("t").setStep("s").setTtlSeconds(60).build()),
          Status.Code.UNAUTHENTICATED, "UNAUTHENTICATED");
    }
  }
}
