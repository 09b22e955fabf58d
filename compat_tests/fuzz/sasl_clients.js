// kafkajs's SASL logins, for the fuzz corpus (compat_tests/fuzz/capture.py): for each login of the JSON
// list given (each {mechanism: 'plain' | 'scram-sha-256' | 'scram-sha-512', username, password} or
// {mechanism: 'oauthbearer', token}), an admin client connects over SASL_PLAINTEXT and lists the topics, and
// a producer sends one record. kafkajs has no SCRAM user administration.
//
// Run: node compat_tests/fuzz/sasl_clients.js BOOTSTRAP TOPIC '[{"mechanism": "plain", ...}]'
// Prints one line per login; exits non-zero when one fails.
'use strict'

const path = require('path')
const { Kafka, logLevel } = require(path.join(__dirname, '..', 'js', 'node_modules', 'kafkajs'))

async function login(bootstrap, topic, sasl) {
  const options =
    sasl.mechanism === 'oauthbearer'
      ? { mechanism: 'oauthbearer', oauthBearerProvider: async () => ({ value: sasl.token }) }
      : sasl
  const kafka = new Kafka({
    clientId: 'golden-kafkajs',
    brokers: [bootstrap],
    sasl: options,
    connectionTimeout: 5000,
    authenticationTimeout: 5000,
    requestTimeout: 10000,
    retry: { retries: 2, initialRetryTime: 100, maxRetryTime: 1000 },
    logLevel: logLevel.NOTHING,
  })
  const admin = kafka.admin()
  await admin.connect()
  try {
    await admin.listTopics()
  } finally {
    await admin.disconnect()
  }
  const producer = kafka.producer({ allowAutoTopicCreation: true })
  await producer.connect()
  try {
    await producer.send({ topic, messages: [{ key: sasl.mechanism, value: 'golden' }] })
  } finally {
    await producer.disconnect()
  }
}

async function main() {
  const [bootstrap, topic, logins] = process.argv.slice(2)
  let failed = false
  for (const sasl of JSON.parse(logins)) {
    try {
      await login(bootstrap, topic, sasl)
      console.log(`${sasl.mechanism}: ok`)
    } catch (error) {
      failed = true
      console.log(`${sasl.mechanism}: ${error.name}: ${error.message}`)
    }
  }
  process.exit(failed ? 1 : 0)
}

main()
