"""`keras_caps.testing.TestCase` clears the session after every test and
runs Python's full garbage collection only every `FULL_COLLECTION_EVERY`
tests (it cost about 0.2 s a test with TensorFlow loaded)."""

from unittest import mock

import keras

from keras_caps.testing import TestCase


class TestCaseCollectionTest(TestCase):
    def test_full_collection_once_every_n_tests(self):
        class Probe(TestCase):  # local: pytest does not collect it
            def runTest(self):
                pass

        probe = Probe()
        saved = TestCase._tests_since_collection
        TestCase._tests_since_collection = 0
        try:
            with mock.patch.object(keras.backend, "clear_session") as clear:
                for _ in range(2 * TestCase.FULL_COLLECTION_EVERY):
                    probe.tearDown()
        finally:
            TestCase._tests_since_collection = saved
        collected = [call.kwargs["free_memory"]
                     for call in clear.call_args_list]
        self.assertEqual(len(collected), 2 * TestCase.FULL_COLLECTION_EVERY)
        every = TestCase.FULL_COLLECTION_EVERY
        self.assertEqual([i for i, full in enumerate(collected) if full],
                         [every - 1, 2 * every - 1])
