"""Actions ``{"name": "Email"|"SMS", "endpoint": ...}``: notify through Amazon SNS.

Like smdebug, all rules share the topic ``SMDebugRules``; each endpoint is subscribed with a
filter policy on its own address so it only gets the messages meant for it. Subscribing happens
when the rule starts, so the e-mail confirmation request arrives before the rule can fire. AWS
errors are logged and never stop the rule.
"""

from __future__ import annotations

import json
from typing import Any

from smdebug_lite.log.logger import get_logger
from smdebug_lite.rules.actions._aws import aws_client

logger = get_logger(__name__)

TOPIC_NAME = "SMDebugRules"
_ATTRIBUTE = {"sms": "phone_num", "email": "email"}


class MessageAction:
    def __init__(self, rule_name: str, message_type: str, endpoint: str) -> None:
        protocol = message_type.strip().lower()
        if protocol not in _ATTRIBUTE:
            raise ValueError(f"message type {message_type!r} is not one of sms, email")
        self.name = protocol
        self.rule_name = rule_name
        self.protocol = protocol
        self.endpoint = endpoint
        self.topic_arn: str | None = None
        self.last_subscription_response: Any = None
        self.last_publish_response: Any = None
        self.error: BaseException | None = None
        self._client: Any = None
        self._setup()

    def _setup(self) -> None:
        try:
            self._client = aws_client("sns")
            self.topic_arn = self._client.create_topic(Name=TOPIC_NAME)["TopicArn"]
            if self._subscribed():
                self.last_subscription_response = "already subscribed"
                return
            policy = {_ATTRIBUTE[self.protocol]: [self.endpoint]}
            self.last_subscription_response = self._client.subscribe(
                TopicArn=self.topic_arn, Protocol=self.protocol, Endpoint=self.endpoint,
                Attributes={"FilterPolicy": json.dumps(policy)}, ReturnSubscriptionArn=False)
            logger.info("Rule %s: subscribed %s %s to SNS topic %s", self.rule_name,
                        self.protocol, self.endpoint, self.topic_arn)
        except Exception as e:
            self.error = e
            logger.error("Rule %s: could not set up SNS %s notification to %s: %s",
                         self.rule_name, self.protocol, self.endpoint, e)

    def _subscribed(self) -> bool:
        token = None
        while True:
            kwargs = {"TopicArn": self.topic_arn}
            if token:
                kwargs["NextToken"] = token
            res = self._client.list_subscriptions_by_topic(**kwargs)
            for sub in res.get("Subscriptions", []):
                if sub.get("Protocol") == self.protocol and sub.get("Endpoint") == self.endpoint:
                    return True
            token = res.get("NextToken")
            if not token:
                return False

    def invoke(self, message: str = "") -> None:
        if self._client is None or self.topic_arn is None:
            logger.error("Rule %s: SNS %s action to %s is not set up; nothing sent",
                         self.rule_name, self.protocol, self.endpoint)
            return
        try:
            self.last_publish_response = self._client.publish(
                TopicArn=self.topic_arn,
                Message=f"SMDebugRule:{self.rule_name} fired. {message}",
                Subject=f"SMDebugRule:{self.rule_name} fired",
                MessageAttributes={_ATTRIBUTE[self.protocol]: {
                    "DataType": "String", "StringValue": self.endpoint}},
            )
            logger.info("Rule %s: notified %s %s", self.rule_name, self.protocol, self.endpoint)
        except Exception as e:
            self.error = e
            logger.error("Rule %s: SNS publish to %s failed: %s", self.rule_name, self.endpoint, e)
