import java.util.List;
import java.util.Properties;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialAlteration;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;

/**
 * The Java client's SASL logins and SCRAM user administration, for the fuzz corpus
 * (compat_tests/fuzz/capture.py): an Admin logs in over SASL_PLAINTEXT with each mechanism (PLAIN, SCRAM-SHA-256,
 * SCRAM-SHA-512, OAUTHBEARER with an unsecured token) and describes the cluster; then, logged in as the PLAIN
 * admin, it creates a SCRAM user (alterUserScramCredentials), describes users (all, and by name, one unknown),
 * asks for refused alterations (too few iterations, deleting a credential that does not exist, a user altered
 * twice in one request), logs in as the new user and deletes it, as {@code kafka-configs.sh --alter --add-config 'SCRAM-SHA-256=[...]'} does.
 *
 * <p>Run from source: {@code java -cp 'compat_tests/java/lib/*' compat_tests/fuzz/SaslClients.java BOOTSTRAP}.
 * Prints one line per operation; exits non-zero when one that should succeed fails.
 */
public final class SaslClients {
    private static final String PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule";
    private static final String SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule";
    private static final String OAUTH = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";

    private static Admin admin(String bootstrap, String mechanism, String jaas) {
        Properties config = new Properties();
        config.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        config.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        config.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        config.put(AdminClientConfig.SECURITY_PROTOCOL_CONFIG, "SASL_PLAINTEXT");
        config.put("sasl.mechanism", mechanism);
        config.put("sasl.jaas.config", jaas);
        return Admin.create(config);
    }

    private static String credentials(String module, String user, String password) {
        return module + " required username=\"" + user + "\" password=\"" + password + "\";";
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String[][] logins = {
            {"PLAIN", credentials(PLAIN, "alice", "alice-secret")},
            {"SCRAM-SHA-256", credentials(SCRAM, "bob", "bob-secret")},
            {"SCRAM-SHA-512", credentials(SCRAM, "bob", "bob-secret")},
            {"OAUTHBEARER", OAUTH + " required unsecuredLoginStringClaim_sub=\"carol\";"},
        };
        for (String[] login : logins) {
            try (Admin admin = admin(bootstrap, login[0], login[1])) {
                System.out.println(login[0] + ": " + admin.describeCluster().nodes().get());
            }
        }
        String user = "golden-java";
        try (Admin admin = admin(bootstrap, "PLAIN", credentials(PLAIN, "admin", "admin-secret"))) {
            // One alteration per user and request: Kafka refuses a user altered twice in one request.
            UserScramCredentialAlteration sha256 = new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192), "golden-secret");
            UserScramCredentialAlteration sha512 = new UserScramCredentialUpsertion(
                user, new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096), "golden-secret");
            admin.alterUserScramCredentials(List.of(sha256)).all().get();
            admin.alterUserScramCredentials(List.of(sha512)).all().get();
            System.out.println("created: " + user);
            System.out.println("described (all): " + admin.describeUserScramCredentials().all().get());
            System.out.println("described (" + user + "): "
                               + admin.describeUserScramCredentials(List.of(user)).all().get());
            try {
                admin.describeUserScramCredentials(List.of(user, "golden-nobody")).all().get();
            } catch (Exception e) {
                System.out.println("described (golden-nobody): " + e.getCause());
            }
            try {
                admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialUpsertion("golden-weak", new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256,
                                                                                             4095), "weak"),
                    new UserScramCredentialDeletion("golden-nobody", ScramMechanism.SCRAM_SHA_512))).all().get();
            } catch (Exception e) {
                System.out.println("refused: " + e.getCause());
            }
            try {
                admin.alterUserScramCredentials(List.of(
                    new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256),
                    new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all().get();
            } catch (Exception e) {
                System.out.println("refused (twice in one request): " + e.getCause());
            }
            try (Admin newcomer = admin(bootstrap, "SCRAM-SHA-256", credentials(SCRAM, user, "golden-secret"))) {
                System.out.println(user + " logged in: " + newcomer.describeCluster().clusterId().get());
            }
            admin.alterUserScramCredentials(List.of(
                new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_256))).all().get();
            admin.alterUserScramCredentials(List.of(
                new UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512))).all().get();
            System.out.println("deleted: " + user);
        }
    }
}
