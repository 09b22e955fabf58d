#!/usr/bin/env node
// A kafkajs consumer group for trafka's group tests. Reads one JSON command on stdin:
//   {"bootstrap", "topic", "groupId", "members": 3, "expected": N, "timeoutMs"}
// starts `members` consumers in one group, each committing synchronously after every batch, and stops
// once the group has consumed `expected` messages with every member holding partitions. Writes one
// JSON result on stdout: {"ok": true, "result": {"consumed": [[member, partition, offset, value]],
// "assignments": {member: [partitions]}, "joinMs": ms from run() to every member joined}}
// or {"ok": false, "error": {"message"}}. Values travel base64-encoded; kafkajs logs go to stderr.
'use strict'

const { Kafka, logLevel } = require('kafkajs')

async function main(command) {
  const kafka = new Kafka({
    clientId: 'trafka-compat-kafkajs-groups',
    brokers: [command.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log }) => {
      process.stderr.write(`kafkajs ${level} ${namespace}: ${JSON.stringify(log)}\n`)
    },
  })
  const consumed = []
  const assignments = {}
  const consumers = []
  const started = Date.now()
  let joinMs = null
  const allAssigned = () =>
    Object.keys(assignments).length === command.members &&
    Object.values(assignments).every(partitions => partitions.length > 0)

  // Every member connects, subscribes and starts at once, as separate processes would.
  const start = async member => {
    const consumer = kafka.consumer({ groupId: command.groupId, sessionTimeout: 6000, heartbeatInterval: 1000 })
    consumer.on(consumer.events.GROUP_JOIN, event => {
      const topics = event.payload.memberAssignment
      assignments[member] = (topics[command.topic] || []).slice().sort((a, b) => a - b)
      if (joinMs === null && allAssigned()) joinMs = Date.now() - started
    })
    consumers.push(consumer)
    await consumer.connect()
    await consumer.subscribe({ topics: [command.topic], fromBeginning: true })
    await consumer.run({
      autoCommit: false,
      eachBatch: async ({ batch, resolveOffset, heartbeat }) => {
        for (const message of batch.messages) {
          consumed.push([member, batch.partition, Number(message.offset), Buffer.from(message.value).toString('base64')])
          resolveOffset(message.offset)
        }
        if (batch.messages.length) {
          const next = String(Number(batch.messages[batch.messages.length - 1].offset) + 1)
          await consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: next }])
        }
        await heartbeat()
      },
    })
  }
  await Promise.all(Array.from({ length: command.members }, (_, member) => start(member)))
  const deadline = Date.now() + (command.timeoutMs || 60000)
  while (!(consumed.length >= command.expected && allAssigned()) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 50))
  }
  await Promise.all(consumers.map(consumer => consumer.disconnect()))
  return { consumed, assignments, joinMs }
}

let input = ''
process.stdin.on('data', chunk => { input += chunk })
process.stdin.on('end', () => {
  main(JSON.parse(input)).then(
    result => { process.stdout.write(JSON.stringify({ ok: true, result })); process.exit(0) },
    error => { process.stdout.write(JSON.stringify({ ok: false, error: { message: String(error && error.stack || error) } })); process.exit(0) },
  )
})
