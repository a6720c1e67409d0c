# audit-11 (c): a throttle's one-fetch probe is lifted by any fetch that has
# a status code (worker_loop.c passes t->status > 0 as "answered"), so a
# response whose headers arrive and whose connection then breaks (200, then
# a reset before the body's end: curl's CURLE_PARTIAL_FILE) reopens the
# source at full width though the fetch failed - the case 28b0e8d meant to
# close for connection errors.  The upstream here throttles the first
# request (429, Retry-After: 1) and answers every later one with a 200 whose
# body is cut short; after the throttle the source must stay at one fetch at
# a time.  Seen failing on 28b0e8d: a peak of 39 concurrent requests (42 in 4 s);
# with the fix, 1 (11 in 4 s).
use strict;
use warnings;
use lib 'test/t';
use AuditNode;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(usleep);
use HTTP::Tiny;

my $port = 18095;
my $dir = PostgreSQL::Test::Utils::tempdir();
open(my $fh, '>', "$dir/up.py") or die;
print $fh <<'PY';
import asyncio, sys
state = {"seen": 0, "now": 0, "peak": 0, "after": 0}
async def serve(reader, writer):
    try:
        line = await reader.readline()
        while (await reader.readline()) not in (b"\r\n", b"\n", b""):
            pass
        if line.startswith(b"GET /peak"):
            body = b"%d %d" % (state["peak"], state["after"])
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
            await writer.drain()
            return
        state["seen"] += 1
        if state["seen"] == 1:
            writer.write(b"HTTP/1.1 429 Too Many\r\nRetry-After: 1\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
            await writer.drain()
            return
        state["after"] += 1
        state["now"] += 1
        state["peak"] = max(state["peak"], state["now"])
        try:
            await asyncio.sleep(0.3)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n{\"id\"")
            await writer.drain()
        finally:
            state["now"] -= 1
    finally:
        writer.close()
async def main():
    server = await asyncio.start_server(serve, "127.0.0.1", int(sys.argv[1]))
    async with server:
        await server.serve_forever()
asyncio.run(main())
PY
close $fh;
my $up = IPC::Run::start(['python3', "$dir/up.py", $port], '>', "$dir/up.log", '2>&1');
usleep(500_000);

my $node = AuditNode::start('audit_truncated_probe', "webhook_ingest.backoff_base = 5s\nwebhook_ingest.backoff_max = 5s\n");
# One job first, so the throttle is set before the backlog arrives.
$node->safe_psql('postgres', qq{
	SELECT webhook_ingest.add_source('cut', 'http://127.0.0.1:$port/obj/{external_id}', max_attempts => 100);
	SELECT webhook_ingest.enqueue('cut', 'first');
});
$node->poll_query_until('postgres', q{
	SELECT throttled_until IS NOT NULL FROM webhook_ingest.queue_stats WHERE source = 'cut'})
  or die 'the source was not throttled';
$node->safe_psql('postgres', q{SELECT count(*) FROM generate_series(1, 40) g, webhook_ingest.enqueue('cut', 'j' || g)});
usleep(4_000_000);
my ($peak, $after) = split / /, HTTP::Tiny->new(no_proxy => [q{127.0.0.1}])->get("http://127.0.0.1:$port/peak")->{content};
ok(defined $after && $after >= 2, "the source was probed after its throttle ($after requests)");
is($peak, 1, "a probe whose response is cut short does not reopen the source (peak $peak concurrent requests)");
$node->stop;
$up->kill_kill;
done_testing();
