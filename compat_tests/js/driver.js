#!/usr/bin/env node
// Drives kafkajs for trafka's compatibility tests. Reads one JSON command on stdin, runs it against the
// broker and writes one JSON result on stdout: {"ok": true, "result": ...} or {"ok": false, "error":
// {"name", "type", "types", "codes", "message"}} where `types`/`codes` are the Kafka errors kafkajs
// reported (outermost first).
// Keys, values and header values travel base64-encoded (null stays null); kafkajs logs go to stderr.
// Every command may carry the client's security settings (see `securityOf`): `ssl` (true, or
// {ca, cert, key} as paths of PEM files) and `sasl` ({mechanism: 'plain' | 'scram-sha-256' |
// 'scram-sha-512', username, password} or {mechanism: 'oauthbearer', token}).
'use strict'

const fs = require('fs')
const { Kafka, CompressionTypes, logLevel } = require('kafkajs')

const COMPRESSION = {
  none: CompressionTypes.None,
  gzip: CompressionTypes.GZIP,
  snappy: CompressionTypes.Snappy,
  lz4: CompressionTypes.LZ4,
  zstd: CompressionTypes.ZSTD,
}

const toBuffer = b64 => (b64 === null || b64 === undefined ? null : Buffer.from(b64, 'base64'))
const fromBuffer = buf => (buf === null || buf === undefined ? null : Buffer.from(buf).toString('base64'))

// kafkajs's `ssl` and `sasl` options from a command's: PEM files read here, an OAUTHBEARER token handed
// over by a provider (kafkajs asks it for {value} before each authentication).
function securityOf(command) {
  const options = {}
  if (command.ssl === true) {
    options.ssl = true
  } else if (command.ssl) {
    const pem = path => fs.readFileSync(path, 'utf8')
    options.ssl = {
      ...(command.ssl.ca ? { ca: [pem(command.ssl.ca)] } : {}),
      ...(command.ssl.cert ? { cert: pem(command.ssl.cert) } : {}),
      ...(command.ssl.key ? { key: pem(command.ssl.key) } : {}),
    }
  }
  if (command.sasl) {
    const { mechanism, username, password, token } = command.sasl
    options.sasl =
      mechanism === 'oauthbearer'
        ? { mechanism, oauthBearerProvider: async () => ({ value: token }) }
        : { mechanism, username, password }
  }
  return options
}

function kafkaFor(command) {
  return new Kafka({
    clientId: 'trafka-compat-kafkajs',
    brokers: [command.bootstrap],
    ...securityOf(command),
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: command.retries ?? 3, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.WARN,
    logCreator: () => ({ namespace, level, log }) => {
      process.stderr.write(`kafkajs ${level} ${namespace}: ${JSON.stringify(log)}\n`)
    },
  })
}

async function withAdmin(command, action) {
  const admin = kafkaFor(command).admin()
  await admin.connect()
  try {
    return await action(admin)
  } finally {
    await admin.disconnect()
  }
}

async function produce(command) {
  const producer = kafkaFor(command).producer({
    idempotent: command.idempotent ?? false,
    allowAutoTopicCreation: true,
    // kafkajs sends at most one in-flight request when idempotent; keep the default elsewhere.
    ...(command.idempotent ? { maxInFlightRequests: 1 } : {}),
  })
  await producer.connect()
  try {
    const messages = command.messages.map(m => ({
      key: toBuffer(m.key),
      value: toBuffer(m.value),
      headers: Object.fromEntries((m.headers || []).map(([name, value]) => [name, toBuffer(value)])),
      ...(m.partition === null || m.partition === undefined ? {} : { partition: m.partition }),
      ...(m.timestamp === null || m.timestamp === undefined ? {} : { timestamp: String(m.timestamp) }),
    }))
    // One send per message keeps the returned offsets aligned with the input order.
    const deliveries = []
    for (const message of messages) {
      const [metadata] = await producer.send({
        topic: command.topic,
        acks: command.acks ?? -1,
        compression: COMPRESSION[command.compression || 'none'],
        messages: [message],
      })
      deliveries.push({ partition: metadata.partition, offset: Number(metadata.baseOffset) })
    }
    return deliveries
  } finally {
    await producer.disconnect()
  }
}

async function consume(command) {
  const consumer = kafkaFor(command).consumer({
    groupId: command.group_id,
    sessionTimeout: 10000,
    rebalanceTimeout: 10000,
    heartbeatInterval: 1000,
    maxWaitTimeInMs: 200,
  })
  await consumer.connect()
  const received = []
  try {
    await consumer.subscribe({ topics: [command.topic], fromBeginning: true })
    await new Promise((resolve, reject) => {
      const timer = setTimeout(
        () => reject(new Error(`consumed ${received.length} of ${command.count} messages in ${command.timeout_ms} ms`)),
        command.timeout_ms
      )
      consumer
        .run({
          autoCommit: false,
          eachMessage: async ({ partition, message }) => {
            received.push({
              partition,
              offset: Number(message.offset),
              timestamp: Number(message.timestamp),
              key: fromBuffer(message.key),
              value: fromBuffer(message.value),
              headers: Object.entries(message.headers || {}).map(([name, value]) => [name, fromBuffer(value)]),
            })
            if (received.length >= command.count) {
              clearTimeout(timer)
              resolve()
            }
          },
        })
        .catch(reject)
      consumer.on(consumer.events.CRASH, event => reject(event.payload.error))
    })
    return received
  } finally {
    await consumer.disconnect()
  }
}

const OPERATIONS = {
  produce,
  consume,
  create_topic: command =>
    withAdmin(command, admin =>
      admin.createTopics({
        waitForLeaders: true,
        topics: [
          {
            topic: command.topic,
            numPartitions: command.partitions,
            replicationFactor: command.replication_factor,
            configEntries: Object.entries(command.configs || {}).map(([name, value]) => ({ name, value })),
          },
        ],
      })
    ),
  delete_topic: command => withAdmin(command, admin => admin.deleteTopics({ topics: [command.topic] })),
  create_partitions: command =>
    withAdmin(command, admin =>
      admin.createPartitions({ topicPartitions: [{ topic: command.topic, count: command.count }] })
    ),
  list_topics: command => withAdmin(command, admin => admin.listTopics()),
  describe_topic: command =>
    withAdmin(command, async admin => {
      const { topics } = await admin.fetchTopicMetadata({ topics: [command.topic] })
      return topics[0].partitions.map(p => ({ partition: p.partitionId, leader: p.leader, replicas: p.replicas }))
    }),
  describe_configs: command =>
    withAdmin(command, async admin => {
      const { resources } = await admin.describeConfigs({
        includeSynonyms: false,
        resources: [{ type: 2 /* TOPIC */, name: command.topic }],
      })
      return Object.fromEntries(resources[0].configEntries.map(e => [e.configName, e.configValue]))
    }),
  watermarks: command =>
    withAdmin(command, async admin =>
      (await admin.fetchTopicOffsets(command.topic)).map(p => ({
        partition: p.partition,
        low: Number(p.low),
        high: Number(p.high),
      }))
    ),
  offsets_for_timestamp: command =>
    withAdmin(command, async admin =>
      (await admin.fetchTopicOffsetsByTimestamp(command.topic, command.timestamp)).map(p => ({
        partition: p.partition,
        offset: Number(p.offset),
      }))
    ),
}

function describeError(error) {
  const types = []
  const codes = []
  const visit = e => {
    if (!e) return
    if (e.type) types.push(e.type)
    if (typeof e.code === 'number') codes.push(e.code)
    for (const inner of e.errors || []) visit(inner)
    visit(e.cause)
  }
  visit(error)
  return { name: error.name, type: types[0] ?? null, types, codes, message: String(error.message) }
}

async function main() {
  const chunks = []
  for await (const chunk of process.stdin) chunks.push(chunk)
  const command = JSON.parse(Buffer.concat(chunks).toString('utf8'))
  const operation = OPERATIONS[command.op]
  let output
  try {
    if (!operation) throw new Error(`unknown op ${command.op}`)
    output = { ok: true, result: (await operation(command)) ?? null }
  } catch (error) {
    output = { ok: false, error: describeError(error) }
  }
  process.stdout.write(JSON.stringify(output) + '\n', () => process.exit(0))
}

// ---------------------------------------------------------------------------------------- sessions
// `node driver.js --session`: a long-lived process for transactional producers, whose state (an open
// transaction) must outlive one command. Reads one JSON command per line, {"id", "op", "name", ...},
// and answers each with one line {"id", "ok": true, "result"} or {"id", "ok": false, "error"}; commands
// run one at a time, in order. Producers are kept by `name`.

const sessionProducers = new Map()

function sessionProducer(command) {
  const entry = sessionProducers.get(command.name)
  if (!entry) throw new Error(`no producer ${command.name}`)
  return entry
}

function transactionOf(command) {
  const entry = sessionProducer(command)
  if (!entry.transaction) throw new Error(`producer ${command.name} has no open transaction`)
  return entry.transaction
}

const SESSION_OPERATIONS = {
  // {name, bootstrap, transactional_id, transaction_timeout_ms}
  txn_open: async command => {
    const producer = kafkaFor(command).producer({
      transactionalId: command.transactional_id,
      idempotent: true,
      maxInFlightRequests: 1,
      allowAutoTopicCreation: true,
      ...(command.transaction_timeout_ms ? { transactionTimeout: command.transaction_timeout_ms } : {}),
    })
    await producer.connect()
    sessionProducers.set(command.name, { producer, transaction: null })
    return null
  },
  // kafkajs initialises the transactional producer id on its first transaction.
  txn_begin: async command => {
    const entry = sessionProducer(command)
    entry.transaction = await entry.producer.transaction()
    return null
  },
  // {name, topic, messages: [{key, value, partition}]}: one send per message, offsets in input order.
  txn_send: async command => {
    const transaction = transactionOf(command)
    const deliveries = []
    for (const m of command.messages) {
      const [metadata] = await transaction.send({
        topic: command.topic,
        acks: -1,
        messages: [{
          key: toBuffer(m.key),
          value: toBuffer(m.value),
          ...(m.partition === null || m.partition === undefined ? {} : { partition: m.partition }),
        }],
      })
      deliveries.push({ partition: metadata.partition, offset: Number(metadata.baseOffset) })
    }
    return deliveries
  },
  // {name, group_id, offsets: [[topic, partition, offset]]}
  txn_send_offsets: async command => {
    const topics = new Map()
    for (const [topic, partition, offset] of command.offsets) {
      if (!topics.has(topic)) topics.set(topic, [])
      topics.get(topic).push({ partition, offset: String(offset) })
    }
    await transactionOf(command).sendOffsets({
      consumerGroupId: command.group_id,
      topics: [...topics].map(([topic, partitions]) => ({ topic, partitions })),
    })
    return null
  },
  txn_commit: async command => {
    const transaction = transactionOf(command)
    sessionProducer(command).transaction = null
    await transaction.commit()
    return null
  },
  txn_abort: async command => {
    const transaction = transactionOf(command)
    sessionProducer(command).transaction = null
    await transaction.abort()
    return null
  },
  txn_close: async command => {
    const entry = sessionProducers.get(command.name)
    sessionProducers.delete(command.name)
    if (entry) await entry.producer.disconnect()
    return null
  },
}

async function session() {
  const lines = require('readline').createInterface({ input: process.stdin, crlfDelay: Infinity })
  const write = output => new Promise(resolve => process.stdout.write(JSON.stringify(output) + '\n', resolve))
  await write({ ready: true })
  for await (const line of lines) {
    if (!line.trim()) continue
    let id = null
    let output
    try {
      const command = JSON.parse(line)
      id = command.id ?? null
      const operation = SESSION_OPERATIONS[command.op]
      if (!operation) throw new Error(`unknown session op ${command.op}`)
      output = { id, ok: true, result: (await operation(command)) ?? null }
    } catch (error) {
      output = { id, ok: false, error: describeError(error) }
    }
    await write(output)
  }
  for (const { producer } of sessionProducers.values()) {
    await producer.disconnect().catch(() => {})
  }
  process.exit(0)
}

if (process.argv.includes('--session')) {
  session()
} else {
  main()
}
