// Stock grpc-go (Debian's golang-google-grpc-dev) against the real reqstate
// sidecar: stubs generated from proto/ by protoc-gen-go and
// protoc-gen-go-grpc at test time, no reqstate code. Built and run by
// tests/stock_clients/run.sh:
//
//	client unix:///path/reqstate.sock            (no bearer token)
//	client 127.0.0.1:PORT BEARER-TOKEN           (TCP with the bearer token)
//
// Exits non-zero at the first failed check; the last line says how many
// checks passed.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	pb "stockclient/reqstatev1"
)

var passed int

func check(ok bool, format string, args ...interface{}) {
	if !ok {
		fmt.Printf("FAIL: "+format+"\n", args...)
		fmt.Printf("go: %d passed, 1 failed\n", passed)
		os.Exit(1)
	}
	passed++
}

func must(err error, what string) {
	check(err == nil, "%s: %v", what, err)
}

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: client TARGET [BEARER-TOKEN]")
		os.Exit(2)
	}
	target := os.Args[1]
	bearer := ""
	if len(os.Args) > 2 {
		bearer = os.Args[2]
	}

	// [snippet go]
	// target: "unix:///run/reqstate/reqstate.sock", or "127.0.0.1:50051" with a bearer token.
	conn, err := grpc.Dial(target, grpc.WithInsecure())
	if err != nil {
		panic(err)
	}
	defer conn.Close()
	client := pb.NewRequestStateClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if bearer != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+bearer)
	}
	minted, err := client.Mint(ctx, &pb.MintRequest{
		Tool: "increase-counter", Step: "confirm", TtlSeconds: 60,
		StateValue: &pb.MintRequest_StateJson{StateJson: `{"n":1}`},
		Context:    []byte("principal=alice"),
	})
	if err != nil {
		panic(err) // status.Code(err), and the ErrorInfo in status.Convert(err).Details()
	}
	// ... the client echoes minted.Token back in the next round ...
	verified, err := client.Verify(ctx, &pb.VerifyRequest{
		Token: minted.Token, Tool: "increase-counter",
		ExpectedStep: &[]string{"confirm"}[0], Context: []byte("principal=alice"),
	})
	if err != nil {
		panic(err)
	}
	if !verified.Valid { // a refused token is an answer, not an error
		fmt.Println("refused:", verified.Reason) // log verified.Detail; tell the client only "invalid"
	}
	// [/snippet go]

	check(minted.Token != "" && minted.KeyId >= 1, "mint: %v", minted)
	check(minted.ExpiresAt > minted.IssuedAt, "mint times: %v", minted)
	check(verified.Valid, "verify: %v", verified)
	check(verified.GetStateJson() == `{"n":1}`, "verified state: %q", verified.GetStateJson())
	check(verified.Step == "confirm" && verified.KeyId == minted.KeyId, "verified step/key: %v", verified)

	// One character of the tag changed: the token is refused, in band.
	tampered := []byte(minted.Token)
	at := len(tampered) - 8
	if tampered[at] == 'A' {
		tampered[at] = 'B'
	} else {
		tampered[at] = 'A'
	}
	refused, err := client.Verify(ctx, &pb.VerifyRequest{Token: string(tampered), Tool: "increase-counter", Context: []byte("principal=alice")})
	must(err, "verify tampered")
	check(!refused.Valid && refused.Reason == pb.Reason_REASON_AUTHENTICATION_FAILED, "tampered: %v", refused)
	// The genuine token for another tool: refused the same way.
	other, err := client.Verify(ctx, &pb.VerifyRequest{Token: minted.Token, Tool: "other-tool", Context: []byte("principal=alice")})
	must(err, "verify other tool")
	check(!other.Valid && other.Reason == pb.Reason_REASON_AUTHENTICATION_FAILED, "other tool: %v", other)

	// Batch: three tokens, verified with one wrong step.
	var items []*pb.MintRequest
	for i := 0; i < 3; i++ {
		items = append(items, &pb.MintRequest{Tool: "t", Step: fmt.Sprintf("s%d", i), TtlSeconds: 60,
			StateValue: &pb.MintRequest_StateJson{StateJson: fmt.Sprint(i)}})
	}
	batch, err := client.MintBatch(ctx, &pb.MintBatchRequest{Items: items})
	must(err, "mint batch")
	check(len(batch.Results) == 3, "batch results: %d", len(batch.Results))
	var checks []*pb.VerifyRequest
	for i, r := range batch.Results {
		check(r.GetMinted().GetToken() != "", "batch item %d: %v", i, r)
		step := fmt.Sprintf("s%d", i)
		checks = append(checks, &pb.VerifyRequest{Token: r.GetMinted().GetToken(), Tool: "t", ExpectedStep: &step})
	}
	wrong := "other"
	checks = append(checks, &pb.VerifyRequest{Token: batch.Results[0].GetMinted().GetToken(), Tool: "t", ExpectedStep: &wrong})
	vb, err := client.VerifyBatch(ctx, &pb.VerifyBatchRequest{Items: checks})
	must(err, "verify batch")
	check(len(vb.Results) == 4, "verify batch results: %d", len(vb.Results))
	for i := 0; i < 3; i++ {
		check(vb.Results[i].Valid && vb.Results[i].GetStateJson() == fmt.Sprint(i), "batch verify %d: %v", i, vb.Results[i])
	}
	check(!vb.Results[3].Valid && vb.Results[3].Reason == pb.Reason_REASON_WRONG_STEP, "wrong step: %v", vb.Results[3])

	// A malformed request is an RPC error with the standard rich details.
	var trailer metadata.MD
	_, err = client.Mint(ctx, &pb.MintRequest{Tool: "", Step: "s", TtlSeconds: 60}, grpc.Trailer(&trailer))
	expectError(err, trailer, codes.InvalidArgument, "INVALID_ARGUMENT")

	// Health, with no token.
	health := healthpb.NewHealthClient(conn)
	for _, service := range []string{"", "reqstate.v1.RequestState"} {
		hctx, hcancel := context.WithTimeout(context.Background(), 5*time.Second)
		answer, err := health.Check(hctx, &healthpb.HealthCheckRequest{Service: service})
		hcancel()
		must(err, "health "+service)
		check(answer.Status == healthpb.HealthCheckResponse_SERVING, "health %q: %v", service, answer.Status)
	}

	if bearer != "" {
		// Without the token: UNAUTHENTICATED.
		nctx, ncancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ncancel()
		var trailer metadata.MD
		_, err := client.Mint(nctx, &pb.MintRequest{Tool: "t", Step: "s", TtlSeconds: 60}, grpc.Trailer(&trailer))
		expectError(err, trailer, codes.Unauthenticated, "UNAUTHENTICATED")
	}
	fmt.Printf("go: %d passed, 0 failed\n", passed)
}

// expectError checks an RPC error's code, its google.rpc.ErrorInfo (domain
// "reqstate") and the reqstate-reason trailer.
func expectError(err error, trailer metadata.MD, code codes.Code, reason string) {
	check(err != nil, "expected %v, got success", code)
	st := status.Convert(err)
	check(st.Code() == code, "code: %v (%s), expected %v", st.Code(), st.Message(), code)
	var infos []*errdetails.ErrorInfo
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			infos = append(infos, info)
		}
	}
	check(len(infos) == 1 && infos[0].Reason == reason && infos[0].Domain == "reqstate", "ErrorInfo: %v", st.Details())
	got := trailer.Get("reqstate-reason")
	check(len(got) == 1 && got[0] == lower(reason), "reqstate-reason trailer: %v", got)
}

func lower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}
