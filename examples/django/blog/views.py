"""The webhook endpoint: the raw body and the headers go to
webhook_ingest.receive(), which checks the signature, picks the post id and
the event id, and queues one fetch per post.  The answer is 202 at once; the
extension's worker fetches the post and calls the handler after the request's
transaction commits."""
from django.db import DatabaseError, connection, transaction
from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST
from psycopg2.extras import Json
from django.conf import settings

# SQLSTATEs receive() raises for a delivery that is the sender's fault.
UNAUTHORIZED = {"28000"}  # invalid_authorization_specification: no or bad signature, stale timestamp
# Classes 22 (data exception: not JSON, no usable post id, an id too long, a number
# out of range) and 54 (program limit exceeded: over max_payload_size, nested too deep).
BAD_REQUEST_CLASSES = {"22", "54"}
# "Not now": class 08 (connection exception: behind the router webhook_ingest_router,
# the object's shard is unreachable, 08006) and 57P03 (the router's intake is closed
# while a shard is added).  503 with Retry-After: the sender delivers again later, and
# the redelivery is deduplicated by its event id.
RETRY_LATER_CLASSES = {"08"}
RETRY_LATER = {"57P03"}


def _sqlstate(error):
    # Django wraps psycopg2's exception; the original, with its pgcode, is the cause.
    return getattr(error.__cause__, "pgcode", None)


@csrf_exempt
@require_POST
def blog_webhook(request):
    try:
        body = request.body.decode("utf-8")
    except UnicodeDecodeError:
        return JsonResponse({"error": "the body is not UTF-8"}, status=400)
    if "\x00" in body:  # PostgreSQL text cannot hold NUL; JSON would escape it as \u0000
        return JsonResponse({"error": "the body holds a NUL byte"}, status=400)
    headers = dict(request.headers)  # names as Django spells them; receive() ignores case
    try:
        # ATOMIC_REQUESTS opened a transaction for the whole request: without
        # this savepoint an error from receive() would leave it aborted, and
        # the 401/400 below could not be answered cleanly (nor anything else
        # written in this request).
        with transaction.atomic():
            with connection.cursor() as cur:
                # psycopg2 cannot adapt a dict: Json() sends it as json text.
                cur.execute("SELECT job_id, outcome FROM webhook_ingest.receive(%s, %s, %s)",
                            [settings.BLOG_WEBHOOK_SOURCE, Json(headers), body])
                job_id, outcome = cur.fetchone()
    except DatabaseError as e:
        code = _sqlstate(e)
        if code in UNAUTHORIZED:
            return JsonResponse({"error": "invalid signature"}, status=401)
        if code and code[:2] in BAD_REQUEST_CLASSES:
            return JsonResponse({"error": "bad webhook", "sqlstate": code}, status=400)
        if code and (code in RETRY_LATER or code[:2] in RETRY_LATER_CLASSES):
            response = JsonResponse({"error": "try again later", "sqlstate": code}, status=503)
            response["Retry-After"] = "5"
            return response
        raise
    # A redelivery (outcome "duplicate") is answered 202 too: the sender stops retrying.
    return JsonResponse({"job_id": job_id, "outcome": outcome}, status=202)
