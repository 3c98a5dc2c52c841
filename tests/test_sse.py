"""The one SSE parser follows the WHATWG event-stream rules exactly."""

from orsbench.wire.sse import SSEParser, parse


def test_crlf_events_and_empty_end_data():
    stream = parse(b"event: task_id\r\ndata: abc\r\n\r\nevent: end\r\ndata: \r\n\r\n")
    assert [(e.event, e.data) for e in stream.events] == [("task_id", "abc"), ("end", "")]
    assert stream.line_endings == {"\r\n"}
    assert stream.incomplete is None


def test_lf_and_cr_line_endings_are_accepted():
    for sep in (b"\n", b"\r"):
        stream = parse(sep.join([b"event: end", b"data: x", b"", b""]))
        assert [(e.event, e.data) for e in stream.events] == [("end", "x")]


def test_exactly_one_space_after_colon_is_stripped():
    stream = parse(b"data:  two spaces\n\ndata:none\n\n")
    assert [e.data for e in stream.events] == [" two spaces", "none"]


def test_multiline_data_joined_with_newline_and_default_event_type():
    stream = parse(b"data: a\ndata: b\n\n")
    assert stream.events[0].event == "message"
    assert stream.events[0].data == "a\nb"


def test_comments_are_recorded_not_dispatched():
    stream = parse(b": ping - 2026\r\n\r\nevent: end\r\ndata: {}\r\n\r\n")
    assert [c.text for c in stream.comments] == [" ping - 2026"]
    assert stream.names() == ["end"]


def test_block_without_data_dispatches_nothing():
    assert parse(b"event: end\n\n").events == []


def test_unterminated_final_event_is_kept_aside_not_dispatched():
    stream = parse(b"event: task_id\ndata: t\n\nevent: end\ndata: {\"ok\":true}")
    assert stream.names() == ["task_id"]
    assert stream.incomplete == {"event": "end", "data": '{"ok":true}'}


def test_crlf_split_across_chunks_is_one_line_break():
    parser = SSEParser()
    got = parser.feed(b"event: end\r\ndata: x\r") + parser.feed(b"\n\r\n")
    assert [(e.event, e.data) for e in got] == [("end", "x")]
    assert parser.close().line_endings == {"\r\n"}


def test_utf8_split_across_chunks_and_bom():
    raw = "\ufeffdata: é€\n\n".encode()
    parser = SSEParser()
    for i in range(len(raw)):
        parser.feed(raw[i : i + 1])
    assert parser.close().events[0].data == "é€"


def test_unknown_fields_are_reported_and_id_retry_parsed():
    stream = parse(b"foo: bar\nid: 7\nretry: 100\ndata: x\n\n")
    assert stream.unknown_fields == ["foo: bar"]
    assert (stream.events[0].id, stream.events[0].retry) == ("7", 100)


def test_framing_departures_are_recorded_for_the_checker():
    stream = parse(b"event:end\r\ndata\r\nfoo: 1\r\ndata: x\r\n\r\n")
    assert stream.unspaced_fields == ["event"]
    assert stream.bare_lines == ["data"]
    assert stream.unknown_fields == ["foo: 1"]
    assert stream.event_fields == ["end"]
    assert stream.events[0].data == "\nx"  # a bare `data` line is an empty data field, by the rules


# -- the one chunk-and-end reassembly ------------------------------------------------------------
_CHUNKED = (
    b"event: task_id\ndata: t-1\n\n"
    b'event: chunk\ndata: {"ok": true, "output": {"blocks": [{"type": "text", "text": "a\n\n'
    b"event: chunk\ndata:   spaced  \n\n"  # a chunk that starts with spaces: an lstrip() loses them
    b'event: end\ndata: "}], "reward": 1.0, "finished": true}}\n\n'
)


def test_every_reader_of_a_chunked_result_goes_through_the_one_reassembly():
    """The checker's evidence, the cassette recorder, the load driver and the reference client read the same text."""
    from orsbench import protocol
    from orsbench.bench.episode import tool_output
    from orsbench.clientcheck.reference import Adapter
    from orsbench.wire.cassette import outcome_of
    from orsbench.wire.evidence import Exchange
    from orsbench.wire.sse import reassemble

    stream = parse(_CHUNKED)
    text = reassemble(((e.event, e.data) for e in stream.events), protocol.EVENT_CHUNK, protocol.EVENT_END)
    assert text == '{"ok": true, "output": {"blocks": [{"type": "text", "text": "a  spaced  "}], "reward": 1.0, "finished": true}}'
    assert Exchange("POST", "/echo/call", {}, b"", 200, sse=stream).reassembled() == text
    assert outcome_of([[e.event, e.data] for e in stream.events])["data"] == text
    assert tool_output(stream)["blocks"][0]["text"] == "a  spaced  "
    assert Adapter.assemble(None, stream) == text  # type: ignore[arg-type]
    assert reassemble([("chunk", "x")], "chunk", "end") is None, "no end: a cut stream carries no result"
