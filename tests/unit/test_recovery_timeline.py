"""Heat's events written on a thread of their own."""

import threading
import unittest

from heat_health.engine.recovery import timeline


class EventWriterTest(unittest.TestCase):

    def test_events_are_written_in_order_and_flushed_at_stop(self):
        written = []
        gate = threading.Event()

        def write(stack_id, name, reason, status):
            gate.wait(10)
            written.append(reason)
        writer = timeline.EventWriter(write)
        writer.start()
        for n in range(5):
            writer.submit('stack', 'server', 'step %d' % n, 'IN_PROGRESS')
        self.assertEqual([], written)
        gate.set()
        writer.stop()
        self.assertEqual(['step %d' % n for n in range(5)], written)

    def test_an_event_that_cannot_be_written_stops_no_other(self):
        written = []

        def write(stack_id, name, reason, status):
            if reason == 'bad':
                raise RuntimeError('the stack is gone')
            written.append(reason)
        writer = timeline.EventWriter(write)
        writer.start()
        for reason in ('first', 'bad', 'last'):
            writer.submit('stack', 'server', reason, 'IN_PROGRESS')
        writer.stop()
        self.assertEqual(['first', 'last'], written)

    def test_before_it_starts_each_step_writes_its_own(self):
        written = []
        writer = timeline.EventWriter(
            lambda *args: written.append(args[2]))
        writer.submit('stack', 'server', 'now', 'IN_PROGRESS')
        self.assertEqual(['now'], written)
